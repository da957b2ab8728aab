import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ConnectionSettings, ConnectionType } from '@xfer/shared';
import { createS3Connector, S3Connector } from '../../src/connectors/s3/s3.connector.js';
import { openKeptTimes, type KeptTimes } from '../../src/connectors/kept-times.js';
import type { ConnectorErrorCode } from '../../src/connectors/types.js';
import { partBytes } from '../../src/connectors/s3/s3.upload.js';
import { runConformance, type ConformanceTarget } from './conformance.suite.js';
import { bodyOf, closedPort, collect, expectCode, randomBody, uniqueName } from './helpers.js';
import { RawS3 } from './s3.raw.js';

// The versitygw of `npm run services` (e2e/src/services/s3.service.ts), started by jest's global
// setup. r2 and gcs run against it too, with host/port/secure set as a user would for a local store.
const env = process.env;
const server = {
  endpoint: env.XFER_TEST_S3_ENDPOINT!,
  host: env.XFER_TEST_S3_HOST!,
  port: Number(env.XFER_TEST_S3_PORT),
  accessKeyId: env.XFER_TEST_S3_ACCESS_KEY!,
  secretAccessKey: env.XFER_TEST_S3_SECRET_KEY!,
  limitedAccessKeyId: env.XFER_TEST_S3_LIMITED_ACCESS_KEY!,
  limitedSecretAccessKey: env.XFER_TEST_S3_LIMITED_SECRET_KEY!,
};
const keys = { access_key_id: server.accessKeyId, secret_access_key: server.secretAccessKey };

function settings(type: ConnectionType, path: string, over: Partial<ConnectionSettings> = {}): ConnectionSettings {
  return {
    id: '000000000000000000000002', name: `${type} conformance`, type, host: server.host, port: server.port, path,
    // r2 and gcs sign for region "auto" unless told otherwise; versitygw accepts only its own.
    options: { secure: false }, agent_id: null, credentials: { ...keys, region: 'us-east-1' }, ...over,
  };
}

/** An index of kept times of its own (connectors/kept-times.ts), removed with `done`. */
function keptTimesIndex(): { index: KeptTimes; done: () => void } {
  const dir = mkdtempSync(join(tmpdir(), 'kept-times-'));
  const index = openKeptTimes(dir);
  if (!index) throw new Error('the index of kept times did not open');
  return { index, done: () => { index.close(); rmSync(dir, { recursive: true, force: true }); } };
}

/**
 * A bucket of its own for one suite, the base path `/<bucket>[/<prefix>]` in it; `indexed`: the
 * connector reads and fills an index of kept times, as an agent with a state directory does.
 */
function s3Target(type: ConnectionType, prefix: string, indexed = false): () => Promise<ConformanceTarget> {
  return async () => {
    const bucket = uniqueName(`conf-${type}`);
    const raw = new RawS3(server, bucket, prefix);
    await raw.createBucket();
    const base = prefix === '' ? `/${bucket}` : `/${bucket}/${prefix}`;
    const port = await closedPort();
    const kept = indexed ? keptTimesIndex() : null;
    return {
      connector: () => createS3Connector(settings(type, base), kept ? { keptTimes: kept.index } : {}),
      raw,
      failures: [
        { name: 'wrong secret key', connector: () => new S3Connector(settings(type, base, { credentials: { ...keys, region: 'us-east-1', secret_access_key: 'wrong-secret' } })), code: 'AUTH', message: /secret access key is not accepted/ },
        { name: 'unknown access key', connector: () => new S3Connector(settings(type, base, { credentials: { ...keys, region: 'us-east-1', access_key_id: 'NOSUCHKEY' } })), code: 'AUTH', message: /not accepted/ },
        { name: 'missing bucket', connector: () => new S3Connector(settings(type, `/${bucket}-missing`)), code: 'NOT_FOUND', message: new RegExp(`bucket ${bucket}-missing does not exist`) },
        { name: 'wrong port', connector: () => new S3Connector(settings(type, base, { port })), code: 'TRANSIENT', message: /connection refused/ },
        { name: 'unknown host', connector: () => new S3Connector(settings(type, base, { host: 'no-such-host.invalid' })), code: 'TRANSIENT', message: /cannot resolve/ },
        { name: 'HTTPS to a plain-HTTP server', connector: () => new S3Connector(settings(type, base, { options: { secure: true } })), code: 'TRANSIENT', message: /TLS/ },
      ],
      // An account with the plain `user` role, which owns no bucket: every request is AccessDenied.
      readOnly: () => new S3Connector(settings(type, base, { credentials: { access_key_id: server.limitedAccessKeyId, secret_access_key: server.limitedSecretAccessKey, region: 'us-east-1' } })),
      unreachable: () => new S3Connector(settings(type, base, { port })),
      listPastOnePage: true,
      modTime: 'metadata',
      // versitygw answers standard composite checksums: the connector verifies the upload without a
      // read-back, by CRC32 parts for s3 and by MD5 parts (the multipart ETag) for r2 and gcs.
      largeStoreVerified: type === 's3' ? 'crc32-parts' : 'md5-parts',
      cleanup: async () => {
        kept?.done();
        await raw.destroy();
      },
    };
  };
}

runConformance('s3 (versitygw), bucket root', s3Target('s3', ''));
runConformance('r2 (versitygw), prefix with a space, index of kept times', s3Target('r2', 'r2 base/data', true));
runConformance('gcs (versitygw), prefix, no multi-object delete', s3Target('gcs', 'gcs-base'));

/** Runs `fn` with a bucket of its own, removed afterwards whatever happened. */
async function withBucket(prefix: string, fn: (bucket: string, raw: RawS3) => Promise<void>): Promise<void> {
  const bucket = uniqueName(prefix);
  const raw = new RawS3(server, bucket, '');
  await raw.createBucket();
  try {
    await fn(bucket, raw);
  } finally {
    await raw.destroy();
  }
}

describe('s3 connector: endpoints and parts', () => {
  it('needs a bucket in the path', () => {
    expect(() => new S3Connector(settings('s3', '/'))).toThrow(/must name a bucket/);
  });

  it('returns the SHA-256 the store confirmed for a single PUT (s3), the MD5 ETag elsewhere, and that the ETag is the Content-MD5 sent', async () => {
    await withBucket('conf-sum', async (bucket, raw) => {
      const s3 = new S3Connector(settings('s3', `/${bucket}`));
      const gcs = new S3Connector(settings('gcs', `/${bucket}`));
      expect(await s3.write('a.txt', bodyOf('abc'), {})).toEqual({ size: 3, checksum: { algorithm: 'sha256', value: 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad' }, storeVerified: 'content-md5' });
      expect(await gcs.write('b.txt', bodyOf('abc'), {})).toEqual({ size: 3, checksum: { algorithm: 'etag', value: '900150983cd24fb0d6963f7d28e17f72' }, storeVerified: 'content-md5' });
      expect((await s3.stat('a.txt'))?.checksum).toEqual({ algorithm: 'sha256', value: 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad' });
      await Promise.all([s3.close(), gcs.close()]);
    });
  });

  it('test() on an empty prefix says the first write creates it', async () => {
    await withBucket('conf-test', async (bucket, raw) => {
      const c = new S3Connector(settings('s3', `/${bucket}/not/yet`));
      await expect(c.test()).resolves.toMatch(/prefix not\/yet\/ is empty so far/);
      await c.close();
    });
  });

  it('reading a directory-like prefix that is no object is NOT_FOUND', async () => {
    await withBucket('conf-dir', async (bucket, raw) => {
      await raw.put('d/file.txt', Buffer.from('x'));
      const c = new S3Connector(settings('s3', `/${bucket}`));
      await expectCode(c.read('d'), 'NOT_FOUND');
      await c.close();
    });
  });

  it('single PUTs (sent without the SDK) map failures like every other request, and keep keys exact', async () => {
    await withBucket('conf-put', async (bucket, raw) => {
      const port = await closedPort();
      const cases: Array<[string, S3Connector, string, RegExp]> = [
        ['wrong secret', new S3Connector(settings('s3', `/${bucket}`, { credentials: { ...keys, region: 'us-east-1', secret_access_key: 'wrong' } })), 'AUTH', /secret access key is not accepted/],
        ['missing bucket', new S3Connector(settings('s3', `/${bucket}-missing`)), 'NOT_FOUND', new RegExp(`bucket ${bucket}-missing does not exist`)],
        ['closed port', new S3Connector(settings('s3', `/${bucket}`, { port })), 'TRANSIENT', /connection refused/],
        ['HTTPS to plain HTTP', new S3Connector(settings('s3', `/${bucket}`, { options: { secure: true } })), 'TRANSIENT', /TLS/],
      ];
      for (const [name, c, code, message] of cases) {
        await expectCode(c.write('x.txt', bodyOf('x'), {}), code as ConnectorErrorCode, message).catch((err: Error) => {
          throw new Error(`${name}: ${err.message}`);
        });
        await c.close();
      }
      // Characters SigV4 and S3 encode differently from encodeURIComponent, in a virtual-hosted-capable name.
      const c = new S3Connector(settings('s3', `/${bucket}`));
      const key = "odd/it's (1) *star* ~tilde~ ü+plus=eq&amp;.txt";
      await c.write(key, bodyOf('odd'), {});
      expect(await raw.sha256(key)).toBe(createHash('sha256').update('odd').digest('hex'));
      await c.close();
    });
  });

  it('a PUT or part whose connection is cut is sent again; cut three times, the write fails TRANSIENT and leaves nothing', async () => {
    await withBucket('conf-cut', async (bucket, raw) => {
      // A TCP relay to the real server that, while `cuts` > 0, cuts the connection a request's bytes
      // arrive on (new or kept alive) instead of passing them on.
      let cuts = 0;
      const relay = net.createServer((client) => {
        const upstream = net.connect(server.port, server.host);
        const close = () => { client.destroy(); upstream.destroy(); };
        client.on('data', (data) => {
          if (cuts > 0) {
            cuts--;
            close();
          } else upstream.write(data);
        });
        upstream.pipe(client);
        client.on('error', close).on('close', close);
        upstream.on('error', close).on('close', close);
      });
      await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve));
      const port = (relay.address() as net.AddressInfo).port;
      const c = new S3Connector(settings('s3', `/${bucket}`, { host: '127.0.0.1', port }), { partBytes: 5 * 1024 * 1024 });
      try {
        cuts = 2;
        const small = await c.write('small.txt', bodyOf('sent twice'), {});
        expect(cuts).toBe(0);
        expect(small.storeVerified).toBe('content-md5');
        expect(await raw.sha256('small.txt')).toBe(createHash('sha256').update('sent twice').digest('hex'));
        const big = randomBody(12 * 1024 * 1024);
        // The first two requests of the multipart upload are cut (CreateMultipartUpload through the
        // SDK's own retries, or parts through ours): the upload still completes, verified.
        cuts = 2;
        expect((await c.write('big.bin', big.body, {})).storeVerified).toBe('crc32-parts');
        expect(cuts).toBe(0);
        expect(await raw.sha256('big.bin')).toBe(big.sha256());
        cuts = 3;
        await expectCode(c.write('never.txt', bodyOf('x'), {}), 'TRANSIENT', /connection/);
        expect(await raw.sha256('never.txt')).toBeNull();
      } finally {
        await c.close();
        relay.close();
      }
    });
  });

  it('sizes parts to fit 10,000 and grows them for streams of unknown length', () => {
    const MiB = 1024 * 1024;
    expect(partBytes(1, undefined, 8 * MiB)).toBe(8 * MiB);
    expect(partBytes(1000, undefined, 8 * MiB)).toBe(8 * MiB);
    expect(partBytes(1001, undefined, 8 * MiB)).toBe(16 * MiB);
    expect(partBytes(9999, undefined, 8 * MiB)).toBe(512 * MiB);
    // 1 TB known in advance: 10,000 parts would not do at 8 MiB.
    expect(partBytes(1, 1e12, 8 * MiB) * 9000).toBeGreaterThanOrEqual(1e12);
  });
});

describe('s3 connector: the index of kept times (connectors/kept-times.ts)', () => {
  const entry = async (c: S3Connector | ReturnType<typeof createS3Connector>, rel: string) => (await collect(c.list('d', { recursive: false }))).find((e) => e.path === rel);

  it("lists the time it kept on an object while the object is the one it wrote or stat'ed; any other object is stat'ed", async () => {
    const kept = keptTimesIndex();
    await withBucket('conf-kept', async (bucket, raw) => {
      const c = createS3Connector(settings('s3', `/${bucket}`), { keptTimes: kept.index });
      const plain = new S3Connector(settings('s3', `/${bucket}`));
      try {
        const time = new Date('1999-03-04T05:06:07.000Z');
        await c.write('d/a.txt', bodyOf('aaaa'), { size: 4, modifiedAt: time });
        expect(await entry(c, 'd/a.txt')).toMatchObject({ size: 4, modifiedAt: time });
        expect((await entry(c, 'd/a.txt'))?.modifiedAtNeedsStat).toBeUndefined();
        // Without the index the listing has the store's write time only.
        expect((await entry(plain, 'd/a.txt'))?.modifiedAtNeedsStat).toBe(true);

        // Rewritten by another client: same size, other bytes, another kept time (rclone's format).
        await raw.put('d/a.txt', Buffer.from('bbbb'), { mtime: '1000000000.5' });
        expect((await entry(c, 'd/a.txt'))?.modifiedAtNeedsStat).toBe(true);
        // A stat reads the kept time and records it: the next listing knows it.
        const other = new Date(1_000_000_000_500);
        expect((await c.stat('d/a.txt'))?.modifiedAt).toEqual(other);
        expect(await entry(c, 'd/a.txt')).toMatchObject({ modifiedAt: other });
        expect((await entry(c, 'd/a.txt'))?.modifiedAtNeedsStat).toBeUndefined();

        // Written without a kept time: forgotten.
        await c.write('d/a.txt', bodyOf('bbbb'), { size: 4 });
        expect((await entry(c, 'd/a.txt'))?.modifiedAtNeedsStat).toBe(true);

        // Written (not listed yet, so its write time is still unknown to the index), then removed,
        // then the same bytes put back by another client without a time: not the object indexed.
        await c.write('d/b.txt', bodyOf('same'), { size: 4, modifiedAt: time });
        await c.remove('d/b.txt');
        await raw.put('d/b.txt', Buffer.from('same'));
        expect((await entry(c, 'd/b.txt'))?.modifiedAtNeedsStat).toBe(true);
        expect((await c.stat('d/b.txt'))?.modifiedAt?.getTime()).not.toBe(time.getTime());
      } finally {
        await Promise.all([c.close(), plain.close()]);
        kept.done();
      }
    });
  });

  it('stats (HEAD, sent without the SDK) map failures as every other request does', async () => {
    await withBucket('conf-head', async (bucket, raw) => {
      await raw.put('d/x.txt', Buffer.from('x'));
      const port = await closedPort();
      const cases: Array<[string, S3Connector, ConnectorErrorCode]> = [
        ['wrong secret', new S3Connector(settings('s3', `/${bucket}`, { credentials: { ...keys, region: 'us-east-1', secret_access_key: 'wrong' } })), 'PERMISSION'],
        ['closed port', new S3Connector(settings('s3', `/${bucket}`, { port })), 'TRANSIENT'],
      ];
      for (const [name, c, code] of cases) {
        await expectCode(c.stat('d/x.txt'), code).catch((err: Error) => {
          throw new Error(`${name}: ${err.message}`);
        });
        await c.close();
      }
      const c = new S3Connector(settings('s3', `/${bucket}`));
      expect(await c.stat('d/missing.txt')).toBeNull();
      expect(await c.stat('d/x.txt')).toMatchObject({ kind: 'file', size: 1 });
      await c.close();
    });
  });
});
