import type { ConnectionSettings } from '@xfer/shared';
import { createFtpConnector, FtpConnector } from '../../src/connectors/ftp/ftp.connector.js';
import { runConformance, type ConformanceTarget } from './conformance.suite.js';
import { closedPort, collect, expectCode, readAll, uniqueName } from './helpers.js';
import { RawFtp } from './ftp.raw.js';

// The vsftpd of `npm run services` (e2e/src/services/vsftpd.service.ts), started by jest's global setup.
const env = process.env;
const server = {
  host: env.XFER_TEST_FTP_HOST!,
  port: Number(env.XFER_TEST_FTP_PORT),
  username: env.XFER_TEST_FTP_USER!,
  password: env.XFER_TEST_FTP_PASSWORD!,
  root: env.XFER_TEST_FTP_ROOT!,
  readonly: env.XFER_TEST_FTP_READONLY_DIR!,
  cert: env.XFER_TEST_FTP_CERT_SHA256!,
};
const OTHER_CERT = Array.from({ length: 32 }, () => '07').join(':');
const PLAIN = { secure: 'none' };
const PINNED = { secure: 'explicit', tls_cert_sha256: server.cert };

function settings(base: string, options: Record<string, unknown>, over: Partial<ConnectionSettings> = {}): ConnectionSettings {
  return {
    id: '000000000000000000000001', name: 'ftp conformance', type: 'ftp', host: server.host, port: server.port,
    path: base, options, agent_id: null, credentials: { username: server.username, password: server.password }, ...over,
  };
}

/** A fresh base directory on the server, and connectors with `options` (plain or TLS) on it. */
function ftpTarget(options: Record<string, unknown>): () => Promise<ConformanceTarget> {
  return async () => {
    const base = `${server.root}/${uniqueName('conformance')}`;
    const raw = await RawFtp.connect({ ...server, base });
    await raw.mkdirs('');
    const port = await closedPort();
    return {
      // Through the registry, as the agent builds it.
      connector: () => createFtpConnector(settings(base, options)),
      raw,
      failures: [
        { name: 'wrong password', connector: () => new FtpConnector(settings(base, options, { credentials: { username: server.username, password: 'not-the-password' } })), code: 'AUTH', message: /login failed.*wrong username or password/ },
        { name: 'unknown user', connector: () => new FtpConnector(settings(base, options, { credentials: { username: 'no-such-user', password: 'x' } })), code: 'AUTH', message: /login failed/ },
        { name: 'wrong port', connector: () => new FtpConnector(settings(base, options, { port })), code: 'TRANSIENT', message: /connection refused/ },
        { name: 'unknown host', connector: () => new FtpConnector(settings(base, options, { host: 'no-such-host.invalid' })), code: 'TRANSIENT', message: /cannot resolve/ },
        { name: 'missing base path', connector: () => new FtpConnector(settings(`${base}/missing`, options)), code: 'NOT_FOUND', message: /does not exist/ },
        { name: 'certificate not the pinned one', connector: () => new FtpConnector(settings(base, { ...PINNED, tls_cert_sha256: OTHER_CERT })), code: 'AUTH', message: /certificate mismatch/ },
        { name: 'self-signed certificate, not pinned', connector: () => new FtpConnector(settings(base, { secure: 'explicit' })), code: 'AUTH', message: /not trusted.*tls_cert_sha256/ },
      ],
      readOnly: () => new FtpConnector(settings(server.readonly, options)),
      unreachable: () => new FtpConnector(settings(base, options, { port })),
      listPastOnePage: true,
      // vsftpd lists MDTM but not MFMT in FEAT, and takes `MDTM <time> <path>` (mdtm_write).
      modTime: 'set',
      cleanup: async () => {
        await raw.destroy();
        raw.close();
      },
    };
  };
}

runConformance('ftp (vsftpd), explicit TLS, pinned certificate', ftpTarget(PINNED));

runConformance('ftp (vsftpd), plain FTP', ftpTarget(PLAIN));

describe('ftp connector: TLS and server specifics', () => {
  it('says in test() which TLS it used and that the certificate matched', async () => {
    const c = new FtpConnector(settings(server.root, PINNED));
    await expect(c.test()).resolves.toMatch(/explicit TLS.*matches the pinned one/);
    await c.close();
    const plain = new FtpConnector(settings(server.root, PLAIN));
    await expect(plain.test()).resolves.toMatch(/plain FTP/);
    await plain.close();
  });

  it('refuses a malformed pin, and a pin without TLS, before connecting', () => {
    expect(() => new FtpConnector(settings(server.root, { tls_cert_sha256: 'AB:CD' }))).toThrow(/tls_cert_sha256/);
    expect(() => new FtpConnector(settings(server.root, { secure: 'none', tls_cert_sha256: server.cert }))).toThrow(/needs TLS/);
  });

  it('implicit TLS against a server that speaks plain FTP first fails with a message', async () => {
    const c = new FtpConnector(settings(server.root, { secure: 'implicit', tls_cert_sha256: server.cert }), { timeoutMs: 5_000 });
    const err = await expectCode(c.test(), 'UNSUPPORTED', /TLS handshake failed.*options.secure/);
    expect(err.message).not.toContain(server.password);
    await c.close();
  });

  it('a base path that is a file is CONFLICT', async () => {
    const c = new FtpConnector(settings(`${server.readonly}/file.txt`, PLAIN));
    await expectCode(c.test(), 'CONFLICT', /not a directory/);
    await c.close();
  });

  it('reading a file the user may not read is PERMISSION', async () => {
    const c = new FtpConnector(settings('/etc', PLAIN));
    await expectCode(c.read('shadow'), 'PERMISSION');
    await c.close();
  });

  it('runs parallel operations on a pool of its connections and reconnects after a drop', async () => {
    const c = new FtpConnector(settings(server.readonly, PLAIN), { connections: 2 });
    const results = await Promise.all(Array.from({ length: 6 }, async () => (await readAll(await c.read('file.txt'))).toString()));
    expect(results).toEqual(Array(6).fill('read only\n'));
    // A read's connection returns to the pool only once the server confirmed the transfer; a stat's when it resolves.
    expect(await c.stat('file.txt')).toMatchObject({ kind: 'file', size: 10 });
    // Cut every idle control connection under the connector, as a server's idle timeout does.
    const idle = (c as unknown as { pool: { idle: { ftp: { socket: { destroy(): void } } }[] } }).pool.idle;
    expect(idle.length).toBeGreaterThan(0);
    for (const client of idle) client.ftp.socket.destroy();
    expect(await collect(c.list('', { recursive: false }))).toMatchObject([{ path: 'file.txt', kind: 'file', size: 10 }]);
    await c.close();
  });
});
