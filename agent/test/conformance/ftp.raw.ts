import { createHash } from 'node:crypto';
import { Readable, Writable } from 'node:stream';
import { Client } from 'basic-ftp';
import type { RawStore } from './conformance.suite.js';

/**
 * The ftp test server through a plain basic-ftp client of its own (one plain-FTP session, not the
 * connector's pool or error handling): what a conformance spec checks lands where it says.
 */
export class RawFtp implements RawStore {
  private queue: Promise<unknown> = Promise.resolve();

  private constructor(
    private readonly client: Client,
    private readonly base: string,
  ) {}

  static async connect(opts: { host: string; port: number; username: string; password: string; base: string }): Promise<RawFtp> {
    const client = new Client(30_000);
    await client.access({ host: opts.host, port: opts.port, user: opts.username, password: opts.password, secure: false });
    return new RawFtp(client, opts.base);
  }

  list(rel: string): Promise<string[]> {
    return this.serial(async () => {
      const out: string[] = [];
      const walk = async (dir: string): Promise<void> => {
        const ok = await this.client.cd(this.abs(dir)).then(() => true, () => false);
        if (!ok) return;
        for (const item of await this.client.list()) {
          if (item.name === '.' || item.name === '..') continue;
          const child = dir ? `${dir}/${item.name}` : item.name;
          out.push(child);
          if (item.isDirectory) await walk(child);
        }
      };
      await walk(rel);
      return out.sort();
    });
  }

  put(rel: string, data: Buffer): Promise<void> {
    return this.serial(async () => {
      await this.mkdirsNow(rel.split('/').slice(0, -1).join('/'));
      await this.client.uploadFrom(Readable.from([data]), this.abs(rel));
    });
  }

  sha256(rel: string): Promise<string | null> {
    return this.serial(async () => {
      const exists = await this.client.size(this.abs(rel)).then(() => true, () => false);
      if (!exists) return null;
      const hash = createHash('sha256');
      await this.client.downloadTo(new Writable({ write: (chunk: Buffer, _e, cb) => { hash.update(chunk); cb(); } }), this.abs(rel));
      return hash.digest('hex');
    });
  }

  /** mkdir -p of `rel` below the base, the base included. */
  mkdirs(rel: string): Promise<void> {
    return this.serial(() => this.mkdirsNow(rel));
  }

  /** Removes the base directory and everything in it. */
  destroy(): Promise<void> {
    return this.serial(async () => {
      await this.client.removeDir(this.base).catch(() => undefined);
    });
  }

  close(): void {
    this.client.close();
  }

  private async mkdirsNow(rel: string): Promise<void> {
    await this.client.send(`MKD ${this.base}`).catch(() => undefined);
    let path = '';
    for (const segment of rel.split('/').filter(Boolean)) {
      path = path ? `${path}/${segment}` : segment;
      await this.client.send(`MKD ${this.abs(path)}`).catch(() => undefined);
    }
  }

  private abs(rel: string): string {
    return rel === '' ? this.base : `${this.base}/${rel}`;
  }

  /** basic-ftp runs one command at a time: specs that put files in parallel queue here. */
  private serial<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.queue.then(fn, fn);
    this.queue = next.catch(() => undefined);
    return next;
  }
}
