import { createHash } from 'node:crypto';
import ssh2, { type SFTPWrapper } from 'ssh2';
import type { RawStore } from './conformance.suite.js';

/** The test sshd of `npm run services` (e2e/src/services/sshd.service.ts), from the XFER_TEST_SFTP_* variables jest's global setup sets. */
export const sftpTestServer = {
  host: process.env.XFER_TEST_SFTP_HOST!,
  port: Number(process.env.XFER_TEST_SFTP_PORT),
  username: process.env.XFER_TEST_SFTP_USER!,
  password: process.env.XFER_TEST_SFTP_PASSWORD!,
  root: process.env.XFER_TEST_SFTP_ROOT!,
  readonly: process.env.XFER_TEST_SFTP_READONLY_DIR!,
  hostKey: process.env.XFER_TEST_SFTP_HOST_KEY_SHA256!,
  keyFile: process.env.XFER_TEST_SFTP_KEY_FILE!,
  encKeyFile: process.env.XFER_TEST_SFTP_ENC_KEY_FILE!,
  encKeyPassphrase: process.env.XFER_TEST_SFTP_ENC_KEY_PASSPHRASE!,
};

/**
 * The sftp test server through a plain ssh2 SFTP session of its own (not the connector's code):
 * what a conformance spec checks lands where it says.
 */
export class RawSftp implements RawStore {
  private constructor(
    private readonly client: InstanceType<typeof ssh2.Client>,
    private readonly sftp: SFTPWrapper,
    private readonly base: string,
  ) {}

  static async connect(opts: { host: string; port: number; username: string; password: string; base: string }): Promise<RawSftp> {
    const client = new ssh2.Client();
    await new Promise<void>((resolve, reject) => {
      client.once('ready', () => resolve());
      client.once('error', reject);
      client.connect({ host: opts.host, port: opts.port, username: opts.username, password: opts.password });
    });
    const sftp = await new Promise<SFTPWrapper>((resolve, reject) => client.sftp((err, s) => (err ? reject(err) : resolve(s))));
    return new RawSftp(client, sftp, opts.base);
  }

  async list(rel: string): Promise<string[]> {
    const out: string[] = [];
    const walk = async (dir: string): Promise<void> => {
      const items = await this.call<{ filename: string; attrs: { isDirectory(): boolean } }[]>((cb) => this.sftp.readdir(this.abs(dir), cb)).catch(() => []);
      for (const item of items) {
        const child = dir ? `${dir}/${item.filename}` : item.filename;
        out.push(child);
        if (item.attrs.isDirectory()) await walk(child);
      }
    };
    await walk(rel);
    return out.sort();
  }

  async put(rel: string, data: Buffer): Promise<void> {
    await this.mkdirs(rel.split('/').slice(0, -1).join('/'));
    await this.call<void>((cb) => this.sftp.writeFile(this.abs(rel), data, (err) => cb(err, undefined)));
  }

  async sha256(rel: string): Promise<string | null> {
    const exists = await this.call((cb) => this.sftp.stat(this.abs(rel), cb)).then(() => true, () => false);
    if (!exists) return null;
    const hash = createHash('sha256');
    for await (const chunk of this.sftp.createReadStream(this.abs(rel))) hash.update(chunk as Buffer);
    return hash.digest('hex');
  }

  /** mkdir -p of `rel` below the base, the base included. */
  async mkdirs(rel: string): Promise<void> {
    await this.call<void>((cb) => this.sftp.mkdir(this.base, (err) => cb(err, undefined))).catch(() => undefined);
    let path = '';
    for (const segment of rel.split('/').filter(Boolean)) {
      path = path ? `${path}/${segment}` : segment;
      await this.call<void>((cb) => this.sftp.mkdir(this.abs(path), (err) => cb(err, undefined))).catch(() => undefined);
    }
  }

  /** Removes the base directory and everything in it. */
  async destroy(): Promise<void> {
    const rmTree = async (abs: string): Promise<void> => {
      const items = await this.call<{ filename: string; attrs: { isDirectory(): boolean } }[]>((cb) => this.sftp.readdir(abs, cb)).catch(() => []);
      for (const item of items) {
        const child = `${abs}/${item.filename}`;
        if (item.attrs.isDirectory()) await rmTree(child);
        else await this.call<void>((cb) => this.sftp.unlink(child, (err) => cb(err, undefined))).catch(() => undefined);
      }
      await this.call<void>((cb) => this.sftp.rmdir(abs, (err) => cb(err, undefined))).catch(() => undefined);
    };
    await rmTree(this.base);
  }

  close(): void {
    this.client.end();
  }

  private abs(rel: string): string {
    return rel === '' ? this.base : `${this.base}/${rel}`;
  }

  private call<T>(fn: (cb: (err: Error | null | undefined, value: T) => void) => void): Promise<T> {
    return new Promise<T>((resolve, reject) => fn((err, value) => (err ? reject(err) : resolve(value))));
  }
}
