import { createHash } from 'node:crypto';
import type { ConnectionSettings } from '@xfer/shared';
import { FileshareConnector, createFileshareConnector } from '../../src/connectors/fileshare/fileshare.connector.js';
import { DEFAULT_FILESHARE_TUNING, fileshareTarget } from '../../src/connectors/fileshare/fileshare.config.js';
import { runConformance, type ConformanceTarget } from './conformance.suite.js';
import { bodyOf, closedPort, expectCode, randomBody, readAll, sha256Of, uniqueName } from './helpers.js';
import { RawFileshare } from './fileshare.raw.js';

// The Azure Files FAKE of `npm run services` (e2e/src/services/azure-files-fake.service.ts; no
// emulator of the File service exists), started by jest's global setup with an account of its own.
const env = process.env;
export const server = {
  connectionString: env.XFER_TEST_FILESHARE_CONNECTION_STRING!,
  endpoint: env.XFER_TEST_FILESHARE_ENDPOINT!,
  port: Number(env.XFER_TEST_FILESHARE_PORT),
  account: env.XFER_TEST_FILESHARE_ACCOUNT!,
  key: env.XFER_TEST_FILESHARE_KEY!,
};

const MiB = 1024 * 1024;

/** A connection string like the server's with `endpoint` (and optionally the key) replaced. */
function connectionString(over: { endpoint?: string; key?: string } = {}): string {
  return `DefaultEndpointsProtocol=http;AccountName=${server.account};AccountKey=${over.key ?? server.key};FileEndpoint=${over.endpoint ?? server.endpoint};`;
}

function settings(path: string, credentials: Record<string, string> = { connection_string: server.connectionString }, over: Partial<ConnectionSettings> = {}): ConnectionSettings {
  return { id: '000000000000000000000004', name: 'fileshare conformance', type: 'fileshare', host: null, port: 443, path, options: {}, agent_id: null, credentials, ...over };
}

/** A share of its own for one suite, the base path `/<share>[/<base>]` in it. */
function fileshareSuite(base: string): () => Promise<ConformanceTarget> {
  return async () => {
    const share = uniqueName('conf-files');
    const raw = new RawFileshare(server.connectionString, share, base);
    await raw.create();
    const path = base === '' ? `/${share}` : `/${share}/${base}`;
    const port = await closedPort();
    const cs = (s: string) => ({ connection_string: s });
    return {
      connector: () => createFileshareConnector(settings(path)),
      raw,
      failures: [
        { name: 'wrong account key', connector: () => new FileshareConnector(settings(path, cs(connectionString({ key: Buffer.from('wrong key').toString('base64') })))), code: 'AUTH', message: /account name or key is not accepted/ },
        { name: 'missing share', connector: () => new FileshareConnector(settings(`/${share}-missing`)), code: 'NOT_FOUND', message: new RegExp(`share ${share}-missing does not exist at http://127\\.0\\.0\\.1:${server.port}`) },
        { name: 'missing base directory', connector: () => new FileshareConnector(settings(`${path}/not-there`)), code: 'NOT_FOUND', message: /not-there does not exist/ },
        { name: 'wrong port', connector: () => new FileshareConnector(settings(path, cs(connectionString({ endpoint: `http://127.0.0.1:${port}/${server.account}` })))), code: 'TRANSIENT', message: new RegExp(`127\\.0\\.0\\.1:${port}.*connection refused`) },
        { name: 'unknown host', connector: () => new FileshareConnector(settings(path, cs(connectionString({ endpoint: `http://no-such-host.invalid/${server.account}` })))), code: 'TRANSIENT', message: /no-such-host\.invalid.*cannot resolve/ },
        { name: 'HTTPS to a plain-HTTP server', connector: () => new FileshareConnector(settings(path, cs(connectionString({ endpoint: server.endpoint.replace('http:', 'https:') })))), code: 'TRANSIENT', message: /TLS/ },
      ],
      unreachable: () => new FileshareConnector(settings(path, cs(connectionString({ endpoint: `http://127.0.0.1:${port}/${server.account}` })))),
      listPastOnePage: true,
      modTime: 'set',
      largeBytes: 20 * MiB,
      // Ranges put with Content-MD5 each, covering the file once; the size set last.
      largeStoreVerified: 'md5-ranges',
      cleanup: () => raw.destroy(),
    };
  };
}

runConformance('fileshare (Azure Files fake), share root', fileshareSuite(''));
runConformance('fileshare (Azure Files fake), directory with a space', fileshareSuite('files base/data'));

describe('fileshare connector: settings, checksums, ranges', () => {
  it('needs a share in the path, and credentials', () => {
    expect(() => new FileshareConnector(settings('/'))).toThrow(/must name a share/);
    expect(() => new FileshareConnector(settings('/s', {}))).toThrow(/fileshare connections need credentials.connection_string, or credentials.account_name/);
    expect(() => new FileshareConnector(settings('/s', { connection_string: 'not a connection string' }))).toThrow(/not a valid Azure Storage connection string .*FileEndpoint/);
  });

  it('account_name + account_key: <account>.file.<endpoint_suffix>, or the host (path-style on an IP)', () => {
    const keys = { account_name: 'acct', account_key: server.key };
    const t = DEFAULT_FILESHARE_TUNING;
    expect(fileshareTarget(settings('/s/a/b', keys), t)).toMatchObject({ share: 's', base: 'a/b', where: 'https://acct.file.core.windows.net' });
    expect(fileshareTarget(settings('/s', keys, { options: { endpoint_suffix: 'core.chinacloudapi.cn' } }), t).where).toBe('https://acct.file.core.chinacloudapi.cn');
    expect(fileshareTarget(settings('/s', keys, { host: '10.0.0.5', port: 10004 }), t).where).toBe('https://10.0.0.5:10004/acct');
    expect(() => new FileshareConnector(settings('/s', { account_name: 'acct', account_key: 'not base64!' }))).toThrow(/not base64/);
  });

  it('returns and keeps the MD5 of the whole file, for one range and for several, size known or not', async () => {
    const share = uniqueName('conf-files-sum');
    const raw = new RawFileshare(server.connectionString, share, '');
    await raw.create();
    try {
      // Small ranges and growth steps, so that a few KiB take several ranges and resizes.
      const c = new FileshareConnector(settings(`/${share}`), { rangeBytes: 1024, growBytes: 1500, queueRanges: 3 });
      expect(await c.write('a.txt', bodyOf('abc'), {})).toEqual({ size: 3, checksum: { algorithm: 'md5', value: '900150983cd24fb0d6963f7d28e17f72' }, storeVerified: 'md5-ranges' });
      const big = Buffer.alloc(5000, 'x');
      const unknown = await c.write('big.bin', bodyOf(big), {});
      const hinted = await c.write('hinted.bin', bodyOf(big), { size: 5000 });
      // A hint smaller than the body: the file grows past it.
      const short = await c.write('short-hint.bin', bodyOf(big), { size: 10 });
      const bigMd5 = createHash('md5').update(big).digest('hex');
      for (const result of [unknown, hinted, short]) expect(result).toEqual({ size: 5000, checksum: { algorithm: 'md5', value: bigMd5 }, storeVerified: 'md5-ranges' });
      expect((await c.stat('a.txt'))?.checksum).toEqual({ algorithm: 'md5', value: '900150983cd24fb0d6963f7d28e17f72' });
      expect(await c.stat('big.bin')).toMatchObject({ size: 5000, checksum: unknown.checksum });
      expect((await readAll(await c.read('short-hint.bin'))).equals(big)).toBe(true);
      await c.close();
    } finally {
      await raw.destroy();
    }
  });

  it('a 20 MiB file of unknown length goes in several 4 MiB ranges and reads back in ranges', async () => {
    const share = uniqueName('conf-files-big');
    const raw = new RawFileshare(server.connectionString, share, '');
    await raw.create();
    try {
      const c = new FileshareConnector(settings(`/${share}`));
      const { body, sha256 } = randomBody(20 * MiB + 5);
      expect(await c.write('d/twenty.bin', body, {})).toMatchObject({ size: 20 * MiB + 5, storeVerified: 'md5-ranges' });
      expect(await raw.sha256('d/twenty.bin')).toBe(sha256());
      expect(await sha256Of(await c.read('d/twenty.bin'))).toBe(sha256());
      const tail = await readAll(await c.read('d/twenty.bin', { start: 20 * MiB }));
      expect(tail.length).toBe(5);
      await c.close();
    } finally {
      await raw.destroy();
    }
  });

  it('test() names the share and the base directory', async () => {
    const share = uniqueName('conf-files-test');
    const raw = new RawFileshare(server.connectionString, share, 'in');
    await raw.create();
    try {
      await expect(new FileshareConnector(settings(`/${share}/in`)).test()).resolves.toMatch(new RegExp(`share ${share} at .* is reachable; directory in exists`));
      await expectCode(new FileshareConnector(settings(`/${share}/in`)).read('missing'), 'NOT_FOUND');
    } finally {
      await raw.destroy();
    }
  });
});
