import { Readable } from 'node:stream';
import { randomBytes } from 'node:crypto';
import { closeSync, existsSync, openSync, readFileSync, statSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import type { ConnectionSettings } from '@xfer/shared';
import { createSftpConnector, SftpConnector } from '../../src/connectors/sftp/sftp.connector.js';
import { closedAccess } from '../../src/connectors/access.js';
import { runConformance, type ConformanceTarget } from './conformance.suite.js';
import { bodyOf, closedPort, expectCode, sha256, uniqueName } from './helpers.js';
import { until } from '../helpers/until.js';
import { RawSftp, sftpTestServer } from './sftp.raw.js';

// The OpenSSH sshd of `npm run services`, started by jest's global setup.
const server = sftpTestServer;
/** The connector's SSH connections and its session, as the tests that look inside need them. */
type Session = { links: Array<{ client: { destroy(): void; once(e: 'close', f: () => void): void } }>; acquire(): Promise<{ sftp: object; release(): void }> };
const sessionOf = (c: SftpConnector) => (c as unknown as { session: Session }).session;
const linksOf = (c: SftpConnector) => sessionOf(c).links;

const OTHER_HOST_KEY = `SHA256:${Buffer.alloc(32, 7).toString('base64').replace(/=+$/, '')}`;

function settings(base: string, credentials: Record<string, string>, over: Partial<ConnectionSettings> = {}): ConnectionSettings {
  return {
    id: '000000000000000000000001', name: 'sftp conformance', type: 'sftp', host: server.host, port: server.port,
    path: base, options: {}, agent_id: null, credentials: { username: server.username, ...credentials }, ...over,
  };
}

/** A fresh base directory on the server, and the connector settings `make` builds for it. */
function sftpTarget(make: (base: string) => ConnectionSettings): () => Promise<ConformanceTarget> {
  return async () => {
    const base = `${server.root}/${uniqueName('conformance')}`;
    const raw = await RawSftp.connect({ ...server, base });
    await raw.mkdirs('');
    const password = { password: server.password };
    const port = await closedPort();
    return {
      // Through the registry, as the agent builds it.
      connector: () => createSftpConnector(make(base)),
      raw,
      failures: [
        { name: 'wrong password', connector: () => new SftpConnector(settings(base, { password: 'not-the-password' })), code: 'AUTH', message: /authentication failed/ },
        { name: 'unknown user', connector: () => new SftpConnector(settings(base, { ...password, username: 'no-such-user' })), code: 'AUTH', message: /authentication failed/ },
        {
          name: 'host key not the pinned one', code: 'AUTH', message: /host key mismatch.*SHA256:/,
          connector: () => new SftpConnector(settings(base, password, { options: { host_key_sha256: OTHER_HOST_KEY } })),
        },
        { name: 'wrong port', connector: () => new SftpConnector(settings(base, password, { port })), code: 'TRANSIENT', message: /connection refused/ },
        { name: 'unknown host', connector: () => new SftpConnector(settings(base, password, { host: 'no-such-host.invalid' })), code: 'TRANSIENT', message: /cannot resolve/ },
        { name: 'missing base path', connector: () => new SftpConnector(settings(`${base}/missing`, password)), code: 'NOT_FOUND', message: /does not exist/ },
      ],
      readOnly: () => new SftpConnector(settings(server.readonly, password)),
      unreachable: () => new SftpConnector(settings(base, password, { port })),
      listPastOnePage: true,
      modTime: 'set',
      cleanup: async () => {
        await raw.destroy();
        raw.close();
      },
    };
  };
}

runConformance('sftp (OpenSSH), password, pinned host key', sftpTarget((base) => settings(base, { password: server.password }, { options: { host_key_sha256: server.hostKey } })));

runConformance('sftp (OpenSSH), private key', sftpTarget((base) => settings(base, { private_key: readFileSync(server.keyFile, 'utf8') })));

describe('sftp connector: keys and host keys', () => {
  it('logs in with an encrypted private key and its passphrase', async () => {
    const c = new SftpConnector(settings(server.root, { private_key: readFileSync(server.encKeyFile, 'utf8'), passphrase: server.encKeyPassphrase }));
    await expect(c.test()).resolves.toMatch(/not pinned/);
    await c.close();
  });

  it('refuses an encrypted key without the right passphrase before connecting', () => {
    const key = readFileSync(server.encKeyFile, 'utf8');
    expect(() => new SftpConnector(settings(server.root, { private_key: key, passphrase: 'wrong' }))).toThrow(/passphrase/);
    expect(() => new SftpConnector(settings(server.root, { private_key: key }))).toThrow(/passphrase/);
  });

  it('accepts the pinned fingerprint with or without the SHA256: prefix and says it matched', async () => {
    for (const pin of [server.hostKey, server.hostKey.replace(/^SHA256:/, '')]) {
      const c = new SftpConnector(settings(server.root, { password: server.password }, { options: { host_key_sha256: pin } }));
      await expect(c.test()).resolves.toMatch(/matches the pinned one/);
      await c.close();
    }
  });

  it('refuses a malformed pin as AUTH', () => {
    expect(() => new SftpConnector(settings(server.root, { password: server.password }, { options: { host_key_sha256: 'SHA256:short' } }))).toThrow(/host_key_sha256/);
  });

  it('a base path that is a file is CONFLICT', async () => {
    const c = new SftpConnector(settings(`${server.readonly}/file.txt`, { password: server.password }));
    await expectCode(c.test(), 'CONFLICT', /not a directory/);
    await c.close();
  });

  it('connects again after the connection drops', async () => {
    const c = new SftpConnector(settings(server.root, { password: server.password }));
    await c.test();
    // Cut the SSH connection under the connector, as a network fault would.
    const [{ client }] = linksOf(c);
    const closed = new Promise<void>((resolve) => client.once('close', resolve));
    client.destroy();
    await closed;
    expect(await c.stat('')).toMatchObject({ kind: 'directory' });
    await c.close();
  });

  it('operations that find every channel busy get connections of their own, up to tuning.connections', async () => {
    const c = new SftpConnector(settings(server.root, { password: server.password }), { connections: 3 });
    const dir = `conns-${Date.now()}`;
    await c.mkdir(dir);
    await Promise.all([0, 1, 2, 3, 4].map((i) => c.write(`${dir}/f${i}`, Readable.from([Buffer.alloc(1024, i)]), { size: 1024 })));
    // Five writes at once: three connections (the first, then one per write finding all busy).
    expect(linksOf(c)).toHaveLength(3);
    const leases = await Promise.all([0, 1, 2, 3, 4].map(() => sessionOf(c).acquire()));
    const clients = new Set(leases.map((l) => l.sftp));
    for (const l of leases) l.release();
    expect(clients.size).toBe(5);
    expect(linksOf(c)).toHaveLength(3);
    await c.close();
  });

  it('a server that refuses a further connection is not asked again: the open one is shared', async () => {
    const access = closedAccess();
    const refused = await closedPort();
    const connect = access.network.connect.bind(access.network);
    let dials = 0;
    // The first dial reaches the server; every later one meets a closed port, as a server at its connection limit.
    access.network.connect = (options) => connect(dials++ === 0 ? options : { ...options, port: refused });
    const c = new SftpConnector(settings(server.root, { password: server.password }), { connections: 4 }, access);
    const dir = `refused-${Date.now()}`;
    await c.mkdir(dir);
    const burst = () => Promise.all([0, 1, 2, 3, 4].map((i) => c.write(`${dir}/f${i}`, Readable.from([Buffer.alloc(512, i)]), { size: 512 })));
    await burst();
    expect(linksOf(c)).toHaveLength(1);
    const after = dials;
    expect(after).toBeGreaterThan(1);
    await burst();
    expect(dials).toBe(after);
    const names: string[] = [];
    for await (const entry of c.list(dir, { recursive: false })) names.push(entry.path);
    expect(names.sort()).toEqual([0, 1, 2, 3, 4].map((i) => `${dir}/f${i}`));
    await c.close();
  });

  it('reading a file the user may not read is PERMISSION', async () => {
    const c = new SftpConnector(settings('/etc', { password: server.password }));
    await expectCode(c.read('shadow'), 'PERMISSION');
    await c.close();
  });
});

describe('sftp connector: reading a written file back through its handle', () => {
  it('returns the SHA-256 and length of what the server holds, not of what was sent', async () => {
    const dir = uniqueName('readback');
    const c = new SftpConnector(settings(server.root, { password: server.password }));
    try {
      await c.mkdir(dir);
      // 3 READs of the connector's 128 KiB and a short one.
      const size = 3 * 128 * 1024 + 777;
      const sent = randomBytes(size);
      const onDisk = join(server.root, dir, 'f.bin');
      // The body's last step waits until the server has written the three whole requests (the
      // short rest goes out once the body ends; sftp-server handles a channel's requests in order),
      // then changes the first byte on the server's disk behind the connector: the read-back must see it.
      const body = Readable.from((async function* () {
        yield sent.subarray(0, 200_000);
        yield sent.subarray(200_000);
        await until('three requests on the server', () => existsSync(onDisk) && statSync(onDisk).size >= 3 * 128 * 1024);
        const fd = openSync(onDisk, 'r+');
        writeSync(fd, Buffer.from([sent[0]! ^ 0xff]), 0, 1, 0);
        closeSync(fd);
      })());
      const result = await c.write(`${dir}/f.bin`, body, { size, readBack: true });
      expect(result.size).toBe(size);
      expect(result.readBack).toEqual({ sha256: sha256(readFileSync(onDisk)), bytes: size });
      expect(result.readBack!.sha256).not.toBe(sha256(sent));

      // An empty file; and without readBack, none is returned.
      expect((await c.write(`${dir}/empty`, bodyOf(''), { size: 0, readBack: true })).readBack).toEqual({ sha256: sha256(''), bytes: 0 });
      expect((await c.write(`${dir}/plain`, bodyOf('x'), { size: 1 })).readBack).toBeUndefined();
    } finally {
      await c.remove(dir).catch(() => undefined);
      await c.close();
    }
  });
});
