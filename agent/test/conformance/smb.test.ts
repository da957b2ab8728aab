import { randomBytes } from 'node:crypto';
import type { ConnectionSettings } from '@xfer/shared';
import { createSmbConnector, SmbConnector } from '../../src/connectors/smb/smb.connector.js';
import { runConformance, type ConformanceTarget } from './conformance.suite.js';
import { bodyOf, closedPort, collect, expectCode, randomBody, readAll, sha256Of, uniqueName } from './helpers.js';
import { RawSmbShare } from './smb.raw.js';

// The smbd of `npm run services` (e2e/src/services/samba.service.ts), started by jest's global
// setup; `smb-signed` is a second one with `server signing = mandatory`.
const env = process.env;
function serverOf(prefix: string) {
  return {
    host: env[`${prefix}_HOST`]!,
    port: Number(env[`${prefix}_PORT`]),
    username: env[`${prefix}_USER`]!,
    password: env[`${prefix}_PASSWORD`]!,
    share: env[`${prefix}_SHARE`]!,
    root: env[`${prefix}_ROOT`]!,
    readonlyShare: env[`${prefix}_READONLY_SHARE`]!,
    encryptedShare: env[`${prefix}_ENCRYPTED_SHARE`]!,
  };
}
type Server = ReturnType<typeof serverOf>;
const server = serverOf('XFER_TEST_SMB');
const signed = serverOf('XFER_TEST_SMB_SIGNED');

function smbSettings(s: Server, path: string, over: Partial<ConnectionSettings> = {}): ConnectionSettings {
  return {
    id: '000000000000000000000005', name: 'smb conformance', type: 'smb', host: s.host, port: s.port,
    path, options: {}, agent_id: null, credentials: { username: s.username, password: s.password }, ...over,
  };
}

/** A fresh directory in the share, and connectors on it. */
function smbTarget(s: Server, dirName: (name: string) => string = (name) => name): () => Promise<ConformanceTarget> {
  return async () => {
    const dir = dirName(uniqueName('conformance'));
    const raw = await RawSmbShare.open(s.root, dir);
    const base = `/${s.share}/${dir}`;
    const port = await closedPort();
    const settings = (over: Partial<ConnectionSettings> = {}, path = base) => smbSettings(s, path, over);
    return {
      // Through the registry's factory, as the agent builds it.
      connector: () => createSmbConnector(settings()),
      raw,
      failures: [
        { name: 'wrong password', connector: () => new SmbConnector(settings({ credentials: { username: s.username, password: 'not-the-password' } })), code: 'AUTH', message: /login failed for .*wrong username or password/ },
        { name: 'unknown user', connector: () => new SmbConnector(settings({ credentials: { username: 'no-such-user', password: 'x' } })), code: 'AUTH', message: /login failed/ },
        { name: 'wrong port', connector: () => new SmbConnector(settings({ port })), code: 'TRANSIENT', message: /connection refused/ },
        { name: 'unknown host', connector: () => new SmbConnector(settings({ host: 'no-such-host.invalid' })), code: 'TRANSIENT', message: /cannot resolve/ },
        { name: 'missing base path', connector: () => new SmbConnector(settings({}, `${base}/missing`)), code: 'NOT_FOUND', message: /base path .*missing does not exist/ },
        { name: 'missing share', connector: () => new SmbConnector(settings({}, '/no-such-share/dir')), code: 'NOT_FOUND', message: /share no-such-share does not exist/ },
      ],
      readOnly: () => new SmbConnector(settings({}, `/${s.readonlyShare}`)),
      unreachable: () => new SmbConnector(settings({ port })),
      listPastOnePage: true,
      modTime: 'set',
      largeBytes: 24 * 1024 * 1024,
      cleanup: () => raw.destroy(),
    };
  };
}

runConformance('smb (Samba smbd), default async I/O', smbTarget(server));

runConformance('smb (Samba smbd, server signing = mandatory), base path with a space', smbTarget(signed, (name) => `with space ${name}`));

describe('smb connector: server specifics', () => {
  it('test() names the dialect and that requests are signed', async () => {
    const c = new SmbConnector(smbSettings(server, `/${server.share}`));
    await expect(c.test()).resolves.toMatch(/SMB 3\.1\.1, signed/);
    await c.close();
    const s = new SmbConnector(smbSettings(signed, `/${signed.share}`));
    await expect(s.test()).resolves.toMatch(/signed, as the server requires/);
    await s.close();
  });

  it('a share that requires encryption is refused with a message that says so', async () => {
    const c = new SmbConnector(smbSettings(server, `/${server.encryptedShare}`));
    await expectCode(c.test(), 'PERMISSION', /refused the share enc .*requires SMB3 encryption .*does not support/);
    await c.close();
  });

  it('a path without a share is refused before connecting', () => {
    expect(() => new SmbConnector(smbSettings(server, '/'))).toThrow(/share in the path/);
  });
});

describe('smb connector: protocol paths', () => {
  const MiB = 1024 * 1024;
  /** The live client under a connector (private: tests look at what went over the wire). */
  const clientOf = (c: SmbConnector) => (c as unknown as { session: { client: { conn: { interimResponses: number; destroy(): void } } } }).session.client;
  let raw: RawSmbShare;
  let base: string;
  beforeAll(async () => {
    const dir = uniqueName('protocol');
    raw = await RawSmbShare.open(server.root, dir);
    base = `/${server.share}/${dir}`;
  });
  afterAll(() => raw.destroy());

  it('waits out interim STATUS_PENDING answers: 24 MiB round-trip byte-identical on default aio settings', async () => {
    const c = new SmbConnector(smbSettings(server, base));
    const { body, sha256: produced } = randomBody(24 * MiB + 3);
    expect(await c.write('big.bin', body, {})).toEqual({ size: 24 * MiB + 3 });
    expect(await raw.sha256('big.bin')).toBe(produced());
    expect(await sha256Of(await c.read('big.bin'))).toBe(produced());
    // Samba's default aio answers large READs and WRITEs asynchronously: the path node-smb2 got wrong ran.
    expect(clientOf(c).conn.interimResponses).toBeGreaterThan(0);
    await c.close();
  });

  it.each([
    ['SMB 3.1.1', 0x0311, 'aes-gmac'],
    ['SMB 3.0.2', 0x0302, 'aes-cmac'],
    ['SMB 3.0', 0x0300, 'aes-cmac'],
    ['SMB 2.1', 0x0210, 'hmac-sha256'],
    ['SMB 2.0.2', 0x0202, 'hmac-sha256'],
  ])('on %s (dialect %d) signs every request with %s and checks every answer', async (name, dialect, algorithm) => {
    for (const s of [server, signed]) {
      const c = new SmbConnector(smbSettings(s, `/${s.share}`), { dialects: [dialect] });
      await expect(c.test()).resolves.toContain(`${name}, signed`);
      expect((clientOf(c).conn as unknown as { signingAlgorithm: string }).signingAlgorithm).toBe(algorithm);
      const data = randomBytes(200_000);
      const rel = `${uniqueName('dialect')}.bin`;
      await c.write(rel, bodyOf(data), {});
      expect((await readAll(await c.read(rel))).equals(data)).toBe(true);
      await c.remove(rel);
      await c.close();
    }
  });

  it('connects again after the connection dropped under it', async () => {
    const c = new SmbConnector(smbSettings(server, base));
    await raw.put('again.txt', Buffer.from('again'));
    expect(await c.stat('again.txt')).toMatchObject({ kind: 'file', size: 5 });
    clientOf(c).conn.destroy();
    expect(await c.stat('again.txt')).toMatchObject({ kind: 'file', size: 5 });
    expect((await readAll(await c.read('again.txt'))).toString()).toBe('again');
    await c.close();
  });

  it('a file as base path is CONFLICT, reading a directory CONFLICT, listing a file CONFLICT', async () => {
    await raw.put('plain.txt', Buffer.from('x'));
    const onFile = new SmbConnector(smbSettings(server, `${base}/plain.txt`));
    await expectCode(onFile.test(), 'CONFLICT', /not a directory/);
    await onFile.close();
    const c = new SmbConnector(smbSettings(server, base));
    await c.mkdir('adir');
    await expectCode(c.read('adir'), 'CONFLICT', /is a directory/);
    await expectCode(collect(c.list('plain.txt', { recursive: false })), 'CONFLICT', /is a file/);
    await c.close();
  });

  it('takes DOMAIN\\user as the username', async () => {
    const c = new SmbConnector(smbSettings(server, base, { credentials: { username: `WORKGROUP\\${server.username}`, password: server.password } }));
    await expect(c.test()).resolves.toMatch(/^Connected to xfer-smb@/);
    await c.close();
  });
});
