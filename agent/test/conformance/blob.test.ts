import { createHash, randomBytes } from 'node:crypto';
import { BlobServiceClient } from '@azure/storage-blob';
import type { ConnectionSettings, FileResult } from '@xfer/shared';
import { BlobConnector, createBlobConnector } from '../../src/connectors/blob/blob.connector.js';
import { DEFAULT_BLOB_TUNING, blobTarget } from '../../src/connectors/blob/blob.config.js';
import { blobError } from '../../src/connectors/blob/blob.errors.js';
import { blockBytes } from '../../src/connectors/blob/blob.upload.js';
import { copyTree } from '../../src/copy/copy-engine.js';
import type { DirectCopyRequest } from '../../src/copy/types.js';
import { FAST_RETRIES, fsConnector, options, rmTemp, snapshot, tempDir, writeTree } from '../helpers/tree.js';
import { runConformance, type ConformanceTarget } from './conformance.suite.js';
import { bodyOf, closedPort, expectCode, uniqueName } from './helpers.js';
import { RawBlob, blobConnectionString, blobTestServer, readListSasConnectionString } from './blob.raw.js';

// The Azurite of `npm run services` (e2e/src/services/azurite.service.ts), started by jest's global
// setup with an account of its own.
const server = blobTestServer;


function settings(path: string, credentials: Record<string, string> = { connection_string: server.connectionString }, over: Partial<ConnectionSettings> = {}): ConnectionSettings {
  return { id: '000000000000000000000003', name: 'blob conformance', type: 'blob', host: null, port: 443, path, options: {}, agent_id: null, credentials, ...over };
}


/** A container of its own for one suite, the base path `/<container>[/<prefix>]` in it. */
function blobSuite(prefix: string): () => Promise<ConformanceTarget> {
  return async () => {
    const container = uniqueName('conf-blob');
    const raw = new RawBlob(server.connectionString, container, prefix);
    await raw.createContainer();
    const base = prefix === '' ? `/${container}` : `/${container}/${prefix}`;
    const port = await closedPort();
    const cs = (s: string) => ({ connection_string: s });
    return {
      connector: () => createBlobConnector(settings(base)),
      raw,
      failures: [
        { name: 'wrong account key', connector: () => new BlobConnector(settings(base, cs(blobConnectionString({ key: Buffer.from('wrong key').toString('base64') })))), code: 'AUTH', message: /account name or key is not accepted/ },
        { name: 'unknown account', connector: () => new BlobConnector(settings(base, cs(blobConnectionString({ account: 'nosuchaccount', endpoint: `http://127.0.0.1:${server.port}/nosuchaccount` })))), code: 'NOT_FOUND', message: /account or container .* does not exist/ },
        { name: 'missing container', connector: () => new BlobConnector(settings(`/${container}-missing`)), code: 'NOT_FOUND', message: new RegExp(`container ${container}-missing does not exist`) },
        { name: 'wrong port', connector: () => new BlobConnector(settings(base, cs(blobConnectionString({ endpoint: `http://127.0.0.1:${port}/${server.account}` })))), code: 'TRANSIENT', message: /connection refused/ },
        { name: 'unknown host', connector: () => new BlobConnector(settings(base, cs(blobConnectionString({ endpoint: `http://no-such-host.invalid/${server.account}` })))), code: 'TRANSIENT', message: /cannot resolve/ },
        { name: 'HTTPS to a plain-HTTP server', connector: () => new BlobConnector(settings(base, cs(blobConnectionString({ endpoint: server.endpoint.replace('http:', 'https:') })))), code: 'TRANSIENT', message: /TLS/ },
      ],
      readOnly: () => new BlobConnector(settings(base, cs(readListSasConnectionString()))),
      unreachable: () => new BlobConnector(settings(base, cs(blobConnectionString({ endpoint: `http://127.0.0.1:${port}/${server.account}` })))),
      listPastOnePage: true,
      // rclone's `mtime` metadata, returned by Get Blob Properties and by List Blobs with include=metadata.
      modTime: 'metadata',
      // Blocks staged with Content-MD5 each, committed, and the commit's size and MD5 confirmed.
      largeStoreVerified: 'md5-blocks',
      cleanup: () => raw.destroy(),
    };
  };
}

runConformance('blob (Azurite), container root', blobSuite(''));
runConformance('blob (Azurite), prefix with a space', blobSuite('blob base/data'));

describe('blob connector: settings, checksums, blocks', () => {
  it('needs a container in the path, and credentials', () => {
    expect(() => new BlobConnector(settings('/'))).toThrow(/must name a container/);
    expect(() => new BlobConnector(settings('/c', {}))).toThrow(/connection_string, or credentials.account_name/);
    expect(() => new BlobConnector(settings('/c', { connection_string: 'not a connection string' }))).toThrow(/not a valid Azure Storage connection string/);
  });

  it('account_name + account_key: <account>.blob.<endpoint_suffix>, or the host (path-style on an IP)', () => {
    const keys = { account_name: 'acct', account_key: server.key };
    expect(blobTarget(settings('/c/p', keys), DEFAULT_BLOB_TUNING)).toMatchObject({ container: 'c', prefix: 'p', where: 'https://acct.blob.core.windows.net' });
    expect(blobTarget(settings('/c', keys, { options: { endpoint_suffix: 'core.chinacloudapi.cn' } }), DEFAULT_BLOB_TUNING).where).toBe('https://acct.blob.core.chinacloudapi.cn');
    expect(blobTarget(settings('/c', keys, { host: '10.0.0.5', port: 10000 }), DEFAULT_BLOB_TUNING).where).toBe('https://10.0.0.5:10000/acct');
    expect(blobTarget(settings('/c', keys, { host: 'storage.example.com' }), DEFAULT_BLOB_TUNING).where).toBe('https://storage.example.com');
    expect(() => new BlobConnector(settings('/c', { account_name: 'acct', account_key: 'not base64!' }))).toThrow(/not base64/);
  });

  it('returns and lists the MD5 the service checked, for one Put Blob and for committed blocks', async () => {
    const container = uniqueName('conf-blob-sum');
    const raw = new RawBlob(server.connectionString, container, '');
    await raw.createContainer();
    try {
      // Small blocks, so that a few KiB take the block path.
      const c = new BlobConnector(settings(`/${container}`), { blockBytes: 1024 });
      expect(await c.write('a.txt', bodyOf('abc'), {})).toEqual({ size: 3, checksum: { algorithm: 'md5', value: '900150983cd24fb0d6963f7d28e17f72' }, storeVerified: 'content-md5' });
      const big = Buffer.alloc(5000, 'x');
      const result = await c.write('big.bin', bodyOf(big), {});
      expect(result).toMatchObject({ size: 5000, storeVerified: 'md5-blocks' });
      expect((await c.stat('a.txt'))?.checksum).toEqual({ algorithm: 'md5', value: '900150983cd24fb0d6963f7d28e17f72' });
      expect((await c.stat('big.bin'))?.checksum).toEqual(result.checksum);
      await c.close();
    } finally {
      await raw.destroy();
    }
  });

  it('test() on an empty prefix says the first write creates it', async () => {
    const container = uniqueName('conf-blob-test');
    const raw = new RawBlob(server.connectionString, container, '');
    await raw.createContainer();
    try {
      const c = new BlobConnector(settings(`/${container}/not/yet`));
      await expect(c.test()).resolves.toMatch(/prefix not\/yet\/ is empty so far/);
      await expectCode(c.read('missing'), 'NOT_FOUND');
      await c.close();
    } finally {
      await raw.destroy();
    }
  });

  it('sizes blocks to fit 50,000 and grows them for streams of unknown length', () => {
    const MiB = 1024 * 1024;
    expect(blockBytes(1, undefined, 8 * MiB)).toBe(8 * MiB);
    expect(blockBytes(5001, undefined, 8 * MiB)).toBe(16 * MiB);
    expect(blockBytes(1, 1e12, 8 * MiB) * 49_999).toBeGreaterThanOrEqual(1e12);
  });
});

describe('blob connector: the service checks the bytes', () => {
  it('a block whose Content-MD5 does not match its bytes is refused, and maps to TRANSIENT (sent again)', async () => {
    const container = uniqueName('conf-blob-md5');
    const raw = new RawBlob(server.connectionString, container, '');
    await raw.createContainer();
    try {
      const client = BlobServiceClient.fromConnectionString(server.connectionString).getContainerClient(container).getBlockBlobClient('x.bin');
      const wrongMd5 = createHash('md5').update('other bytes').digest();
      let caught: unknown;
      await client.stageBlock(Buffer.from('000001').toString('base64'), Buffer.from('bytes'), 5, { transactionalContentMD5: wrongMd5 }).catch((err: unknown) => (caught = err));
      const mapped = blobError(caught, { op: 'write', path: 'x.bin', container, where: server.endpoint });
      expect({ code: mapped.code, message: mapped.message }).toEqual({ code: 'TRANSIENT', message: expect.stringMatching(/Content-MD5|Md5Mismatch/) });
    } finally {
      await raw.destroy();
    }
  });
});

describe('copy engine through the blob connector', () => {
  it('fs → blob → fs: byte-identical, verified by the service through MD5 without a re-read, unchanged files skipped by MD5', async () => {
    const container = uniqueName('conf-blob-engine');
    const raw = new RawBlob(server.connectionString, container, '');
    await raw.createContainer();
    const src = tempDir('xfer-blob-src-');
    const back = tempDir('xfer-blob-back-');
    const tree = { 'small.txt': 'hello blob\n', 'empty.bin': '', 'naïve dir/日本.md': '# 見出し\n', 'big/twenty.bin': randomBytes(20 * 1024 * 1024 + 3) };
    const blob = new BlobConnector(settings(`/${container}/engine`));
    try {
      writeTree(src, tree);
      const run = async (request: Pick<DirectCopyRequest, 'source' | 'destination'>) => {
        const files: FileResult[] = [];
        const outcome = await copyTree({
          ...request, sourcePath: '/', destinationPath: '/', options: options(), resume: false,
          signal: new AbortController().signal, tuning: FAST_RETRIES, observer: { fileDone: (r) => files.push(r) },
        });
        return { outcome, files: Object.fromEntries(files.map((f) => [f.path, f])) };
      };
      const up = await run({ source: fsConnector(src), destination: blob });
      expect(up.outcome.status).toBe('completed');
      // The engine hashes MD5 too for an object store and compares it with the MD5 the write
      // returned (the one the service checked and keeps): no read-back.
      expect(up.files['small.txt']).toMatchObject({ status: 'copied', verified_by: 'content-md5' });
      expect(up.files['big/twenty.bin']).toMatchObject({ status: 'copied', verified_by: 'md5-blocks' });
      const down = await run({ source: blob, destination: fsConnector(back) });
      expect(down.outcome.status).toBe('completed');
      expect(snapshot(back)).toEqual(snapshot(src));
      // Both sides now report the same MD5 (blob → blob): the second run copies nothing.
      const again = await run({ source: blob, destination: blob });
      expect(again.outcome.counters).toMatchObject({ files_transferred: 0, files_skipped: 4, files_failed: 0 });
    } finally {
      await blob.close();
      rmTemp(src);
      rmTemp(back);
      await raw.destroy();
    }
  });
});
