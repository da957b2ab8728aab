import { createHash, randomBytes } from 'node:crypto';
import { lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync, existsSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { Readable } from 'node:stream';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import {
  AbortMultipartUploadCommand,
  CreateBucketCommand,
  DeleteBucketCommand,
  DeleteObjectCommand,
  ListMultipartUploadsCommand,
  ListObjectsV2Command,
  ListPartsCommand,
  PutObjectCommand,
  S3Client,
} from '@aws-sdk/client-s3';
import { ServiceUnavailableError } from '../src/errors.js';
import { LocalFileStore, S3FileStore, StoredObjectMissingError, type FileStore, type PendingObject } from '../src/plugins/app/files/store/index.js';
import type { S3FileStoreConfig } from '../src/plugins/app/files/store/s3.store.js';
import { buildTestApp } from './helper.js';
import { eventually } from './protocol-client.js';

// The same spec runs against a local directory and against the real S3 server of the tests (the
// versitygw of `npm run services`, settings in process.env from jest's global setup), each seen
// through its raw listing (the directory tree; ListObjectsV2 and ListMultipartUploads).

const MiB = 1024 * 1024;
const PART = 8 * MiB;
const env = process.env;

/** A store's backend as the tests see it: new store instances on it, and its raw contents. */
interface Backend {
  readonly name: 'local' | 's3';
  /** A new store on the same storage (a second instance, or the service after a restart). */
  store(): FileStore;
  /** What is visible as committed content: files under objects/; every object key in the bucket. */
  rawObjects(): Promise<string[]>;
  /** Temporary content: files under tmp/; multipart uploads in the bucket. */
  rawTemporary(): Promise<string[]>;
  /** Bytes in the temporary content: of the files under tmp/; of the parts uploaded. */
  temporaryBytes(): Promise<number>;
  /** The times a sweep compares, oldest first: the files' mtimes; the uploads' initiation times (ms). */
  temporaryTimes(): Promise<number[]>;
  /** A key that has the right shape but names nothing. */
  unknownKey(): string;
  /** Puts content outside the store's key space; returns its absolute path or bucket key. */
  decoy(): Promise<{ location: string; exists: () => Promise<boolean>; remove: () => Promise<void> }>;
  destroy(): Promise<void>;
}

function localBackend(): Backend {
  const root = mkdtempSync(join(tmpdir(), 'xfer-file-store-'));
  const dir = join(root, 'files');
  const stores: LocalFileStore[] = [];
  const filesUnder = (sub: string): string[] => {
    const base = join(dir, sub);
    if (!existsSync(base)) return [];
    return readdirSync(base, { recursive: true, withFileTypes: true }).filter((e) => e.isFile()).map((e) => relative(base, join(e.parentPath, e.name)));
  };
  return {
    name: 'local',
    store: () => {
      const store = new LocalFileStore(dir);
      stores.push(store);
      return store;
    },
    rawObjects: async () => filesUnder('objects'),
    rawTemporary: async () => filesUnder('tmp'),
    temporaryBytes: async () => filesUnder('tmp').reduce((sum, name) => sum + lstatSync(join(dir, 'tmp', name)).size, 0),
    temporaryTimes: async () => filesUnder('tmp').map((name) => lstatSync(join(dir, 'tmp', name)).mtimeMs).sort((a, b) => a - b),
    unknownKey: () => {
      const id = randomBytes(16).toString('hex');
      return `${id.slice(0, 2)}/${id}`;
    },
    decoy: async () => {
      const location = join(root, 'decoy');
      writeFileSync(location, 'not the store');
      return { location, exists: async () => existsSync(location), remove: async () => rmSync(location) };
    },
    destroy: async () => rmSync(root, { recursive: true, force: true }),
  };
}

const s3Server = {
  endpoint: env.XFER_TEST_S3_ENDPOINT!,
  region: env.XFER_TEST_S3_REGION ?? 'us-east-1',
  accessKeyId: env.XFER_TEST_S3_ACCESS_KEY!,
  secretAccessKey: env.XFER_TEST_S3_SECRET_KEY!,
};

function s3Config(bucket: string, over: Partial<S3FileStoreConfig> = {}): S3FileStoreConfig {
  return { kind: 's3', endpoint: s3Server.endpoint, bucket, prefix: 'xfer/', region: s3Server.region, accessKeyId: s3Server.accessKeyId, secretAccessKey: s3Server.secretAccessKey, forcePathStyle: true, ...over };
}

function s3Backend(): Backend & { create(): Promise<void> } {
  const bucket = `xfer-file-store-${randomBytes(5).toString('hex')}`;
  const raw = new S3Client({ endpoint: s3Server.endpoint, region: s3Server.region, forcePathStyle: true, credentials: s3Server, requestChecksumCalculation: 'WHEN_REQUIRED', responseChecksumValidation: 'WHEN_REQUIRED' });
  const stores: S3FileStore[] = [];
  const keys = async () => {
    const out: string[] = [];
    let token: string | undefined;
    do {
      const page = await raw.send(new ListObjectsV2Command({ Bucket: bucket, ContinuationToken: token }));
      out.push(...(page.Contents ?? []).map((o) => o.Key!));
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
    return out;
  };
  const uploads = async () => {
    const page = await raw.send(new ListMultipartUploadsCommand({ Bucket: bucket }));
    return (page.Uploads ?? []).map((u) => ({ key: u.Key!, id: u.UploadId!, initiated: u.Initiated! }));
  };
  return {
    name: 's3',
    create: async () => void (await raw.send(new CreateBucketCommand({ Bucket: bucket }))),
    store: () => {
      const store = new S3FileStore(s3Config(bucket));
      stores.push(store);
      return store;
    },
    rawObjects: keys,
    rawTemporary: async () => (await uploads()).map((u) => u.key),
    temporaryBytes: async () => {
      let sum = 0;
      for (const u of await uploads()) {
        const parts = await raw.send(new ListPartsCommand({ Bucket: bucket, Key: u.key, UploadId: u.id }));
        for (const part of parts.Parts ?? []) sum += part.Size ?? 0;
      }
      return sum;
    },
    temporaryTimes: async () => (await uploads()).map((u) => u.initiated.getTime()).sort((a, b) => a - b),
    unknownKey: () => `xfer/objects/${randomBytes(16).toString('hex')}`,
    decoy: async () => {
      const location = `decoy-${randomBytes(4).toString('hex')}`;
      await raw.send(new PutObjectCommand({ Bucket: bucket, Key: location, Body: 'not the store' }));
      return {
        location,
        exists: async () => (await keys()).includes(location),
        remove: async () => void (await raw.send(new DeleteObjectCommand({ Bucket: bucket, Key: location }))),
      };
    },
    destroy: async () => {
      for (const u of await uploads()) await raw.send(new AbortMultipartUploadCommand({ Bucket: bucket, Key: u.key, UploadId: u.id }));
      for (const key of await keys()) await raw.send(new DeleteObjectCommand({ Bucket: bucket, Key: key }));
      await raw.send(new DeleteBucketCommand({ Bucket: bucket }));
      for (const store of stores) await store.close();
      raw.destroy();
    },
  };
}

/** `data` as a stream of chunks of assorted sizes (1 byte to 300 KiB), as a network body would come. */
function streamOf(data: Buffer): Readable {
  const chunks: Buffer[] = [];
  for (let at = 0, i = 0; at < data.length; i++) {
    const size = [1, 65_536, 300 * 1024, 7, 16_384][i % 5]!;
    chunks.push(data.subarray(at, at + size));
    at += size;
  }
  return Readable.from(chunks);
}

async function readAll(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/** A body that yields `bytes` bytes and then fails with `err` (or, without one, stalls forever). */
function failingBody(bytes: number, err?: Error): { body: Readable; sent: Promise<void> } {
  let markSent!: () => void;
  const sent = new Promise<void>((resolve) => (markSent = resolve));
  let given = 0;
  const body = new Readable({
    read() {
      if (given < bytes) {
        const n = Math.min(MiB, bytes - given);
        given += n;
        this.push(randomBytes(n));
        return;
      }
      markSent();
      if (err) this.destroy(err);
    },
  });
  return { body, sent };
}

async function expectNothingLeft(backend: Backend): Promise<void> {
  expect({ objects: await backend.rawObjects(), temporary: await backend.rawTemporary() }).toEqual({ objects: [], temporary: [] });
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const backends: [string, () => Backend & { create?: () => Promise<void> }][] = [
  ['local directory', localBackend],
  ['S3 (versitygw)', s3Backend],
];

describe.each(backends)('file store on %s', (_label, makeBackend) => {
  let backend: Backend;
  let store: FileStore;

  beforeAll(async () => {
    const b = makeBackend();
    await b.create?.();
    backend = b;
    store = backend.store();
    if (store instanceof LocalFileStore) await store.start();
  });
  afterAll(async () => {
    await backend?.destroy();
  });

  test.each([
    ['an empty file', 0],
    ['a 1-byte file', 1],
    ['a file of exactly one part', PART],
    ['a multi-part file of about 20 MiB', 20 * MiB + 12_345],
  ])('%s: write, commit, then read whole and by range byte-identical; nothing is visible before commit', async (_name, size) => {
    const data = randomBytes(size);
    const pending = await store.write(streamOf(data));
    expect(pending.size).toBe(size);
    expect(await backend.rawObjects()).toEqual([]);

    const key = await pending.commit();
    expect(await pending.commit()).toBe(key);
    expect((await backend.rawObjects()).length).toBe(1);
    expect(await backend.rawTemporary()).toEqual([]);
    expect((await readAll(await store.read(key))).equals(data)).toBe(true);
    const ranges = size === 0 ? [] : [[0, 0], [size - 1, size - 1], [0, size - 1], [Math.floor(size / 3), Math.floor(size / 2)]];
    if (size > PART) ranges.push([PART - 10, PART + 10]);
    for (const [start, end] of ranges) {
      expect((await readAll(await store.read(key, { start: start!, end: end! }))).equals(data.subarray(start!, end! + 1))).toBe(true);
    }
    // A discard after the commit keeps the committed content.
    await pending.discard();
    expect((await readAll(await store.read(key))).length).toBe(size);

    await store.remove(key);
    await expectNothingLeft(backend);
  });

  test('commit makes a new, unique key for every write', async () => {
    const keys = await Promise.all([1, 2, 3].map(async () => (await store.write(Readable.from([Buffer.from('same')]))).commit()));
    expect(new Set(keys).size).toBe(3);
    for (const key of keys) await store.remove(key);
    await expectNothingLeft(backend);
  });

  test('discard removes the temporary content of short and multi-part writes; it is idempotent and a commit after it rejects', async () => {
    const short = await store.write(streamOf(randomBytes(1000)));
    const long = await store.write(streamOf(randomBytes(PART + MiB)));
    expect(await backend.rawObjects()).toEqual([]);
    // Local: both temp files; S3: the multipart upload (the short body waits in memory).
    expect((await backend.rawTemporary()).length).toBe(backend.name === 'local' ? 2 : 1);
    await short.discard();
    await long.discard();
    await long.discard();
    await expectNothingLeft(backend);
    await expect(long.commit()).rejects.toThrow(/discard/);
  });

  test.each([
    ['within the first part', 100 * 1024],
    ['after several parts', 2 * PART + 3 * MiB],
  ])('a body that fails %s: the write rejects with its error and leaves nothing', async (_name, bytes) => {
    const failure = new Error('client went away');
    const { body } = failingBody(bytes, failure);
    await expect(store.write(body)).rejects.toBe(failure);
    expect(body.destroyed).toBe(true);
    await expectNothingLeft(backend);
  });

  test.each([
    ['within the first part', 100 * 1024],
    ['after several parts', 2 * PART + 3 * MiB],
  ])('an abort while the body stalls %s: the write rejects with the abort reason and leaves nothing', async (_name, bytes) => {
    const { body, sent } = failingBody(bytes);
    const controller = new AbortController();
    const writing = store.write(body, controller.signal);
    await sent;
    // The abort comes once the store holds all it can of what the body gave, waiting for more:
    // the local store writes 1 MiB batches; the S3 store uploads whole parts once the body is
    // longer than one (a body within its first part stays in memory).
    const stored = backend.name === 'local' ? bytes - (bytes % MiB) : bytes >= 2 * PART ? bytes - (bytes % PART) : 0;
    await eventually(async () => (await backend.temporaryBytes()) === stored, `${stored} bytes of the body stored`);
    const reason = new Error('malware found');
    controller.abort(reason);
    await expect(writing).rejects.toBe(reason);
    await expectNothingLeft(backend);
  });

  test('an already aborted signal rejects before anything is written', async () => {
    const controller = new AbortController();
    controller.abort(new Error('gone'));
    await expect(store.write(streamOf(randomBytes(10)), controller.signal)).rejects.toThrow('gone');
    await expectNothingLeft(backend);
  });

  test('remove is idempotent; a removed or unknown key is StoredObjectMissingError', async () => {
    const key = await (await store.write(streamOf(randomBytes(10)))).commit();
    await store.remove(key);
    await store.remove(key);
    await store.remove(backend.unknownKey());
    await expect(store.read(key)).rejects.toBeInstanceOf(StoredObjectMissingError);
    await expect(store.read(backend.unknownKey())).rejects.toBeInstanceOf(StoredObjectMissingError);
    await expectNothingLeft(backend);
  });

  test('keys outside the store (path escapes, absolute paths, other prefixes) are never read or removed', async () => {
    const decoy = await backend.decoy();
    const kept = await (await store.write(streamOf(Buffer.from('kept')))).commit();
    const [fan, id] = backend.name === 'local' ? kept.split('/') : ['', kept];
    const malicious = [
      '../decoy', '../../decoy', decoy.location, `/${decoy.location}`, `${fan}/../../../decoy`, `${kept}/../../../decoy`,
      `${kept}/../${id}`, `objects/../../decoy`, '..%2Fdecoy', `${kept}\0`, `${kept}\n`, ' ', '', '.', '/', `xfer/objects/../${decoy.location}`,
    ];
    for (const key of malicious) {
      await expect(store.read(key)).rejects.toBeInstanceOf(StoredObjectMissingError);
      await store.remove(key);
    }
    expect(await decoy.exists()).toBe(true);
    expect((await readAll(await store.read(kept))).toString()).toBe('kept');
    await store.remove(kept);
    await decoy.remove();
    await expectNothingLeft(backend);
  });

  test('sweep removes temporary content older than the cutoff that another (crashed) instance left, and keeps fresh content', async () => {
    const crashed = backend.store();
    const stale = await crashed.write(streamOf(randomBytes(PART + 1)));
    expect(stale.size).toBe(PART + 1);
    // The sweep compares the store's own times (an S3 store may keep whole seconds): the fresh
    // write starts over a second after the stale content's time, whatever the clock says then.
    const [staleAt] = await backend.temporaryTimes();
    await eventually(async () => Date.now() >= staleAt! + 1_100, "the clock past the stale content's second");
    const fresh = await store.write(streamOf(randomBytes(PART + 2)));
    const times = await backend.temporaryTimes();
    expect(times).toHaveLength(2);
    expect(times[0]).toBe(staleAt);
    expect(times[1]! - times[0]!).toBeGreaterThanOrEqual(1_000);
    // A maximum age that puts the cutoff halfway between the two, however long the writes took
    // (the sweep takes its cutoff as it is called).
    const between = (times[0]! + times[1]!) / 2;
    expect(await store.sweep(Date.now() - between)).toBe(1);
    expect((await backend.rawTemporary()).length).toBe(1);
    expect(await store.sweep(Date.now() - between)).toBe(0);
    const key = await fresh.commit();
    expect((await readAll(await store.read(key))).length).toBe(PART + 2);
    await store.remove(key);
    await stale.discard();
    await expectNothingLeft(backend);
  });

  test('a 1 GiB stream made on the fly is stored and read back with bounded memory', async () => {
    const total = 1024 * MiB;
    const hash = createHash('sha256');
    let made = 0;
    const body = new Readable({
      read() {
        if (made >= total) return void this.push(null);
        const block = Buffer.allocUnsafe(MiB).fill(made / MiB);
        block.writeUInt32BE(made / MiB, 100);
        hash.update(block);
        made += MiB;
        this.push(block);
      },
    });
    // What stays live, collected before each sample (once a second: a full collection is not
    // free): the garbage of freed 1 MiB blocks lingers for as long as the runtime likes (Node 24
    // let the RSS grow by 303 MiB in CI where Node 20 stopped near 155), which says nothing about
    // the store holding the file.
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const live = () => { gc(); const m = process.memoryUsage(); return m.heapUsed + m.arrayBuffers; };
    const baseline = live();
    let peak = baseline;
    const sampler = setInterval(() => (peak = Math.max(peak, live())), 1000);
    try {
      const pending = await store.write(body);
      expect(pending.size).toBe(total);
      const key = await pending.commit();
      const writeGrowth = peak - baseline;
      const readHash = createHash('sha256');
      for await (const chunk of await store.read(key)) readHash.update(chunk as Buffer);
      expect(readHash.digest('hex')).toBe(hash.digest('hex'));
      await store.remove(key);
      const growthMiB = Math.round((peak - baseline) / MiB);
      process.stderr.write(`file store on ${backend.name}: 1 GiB, live memory growth ${Math.round(writeGrowth / MiB)} MiB writing, ${growthMiB} MiB writing and reading\n`);
      // A buffering store would keep the whole GiB; a streaming one its parts in flight (about
      // 24 MiB), plus what V8's background sweeper has yet to free of the buffers a collection
      // found dead (up to 60 MiB seen): a quarter of the file bounds both.
      expect(growthMiB).toBeLessThan(256);
    } finally {
      clearInterval(sampler);
    }
  }, 300_000);
});

describe('local file store: files and directories', () => {
  let root: string;
  beforeEach(() => (root = mkdtempSync(join(tmpdir(), 'xfer-file-store-'))));
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  test('directories are created 0700, temp files 0600, and committed files live under objects/<fan-out>/', async () => {
    const store = new LocalFileStore(join(root, 'files'));
    await store.start();
    for (const dir of ['files', 'files/tmp', 'files/objects']) expect(statSync(join(root, dir)).mode & 0o777).toBe(0o700);
    const pending = await store.write(Readable.from([Buffer.from('abc')]));
    const [temp] = readdirSync(join(root, 'files/tmp'));
    expect(statSync(join(root, 'files/tmp', temp!)).mode & 0o777).toBe(0o600);
    const key = await pending.commit();
    expect(key).toMatch(/^([0-9a-f]{2})\/\1[0-9a-f]{30}$/);
    expect(readFileSync(join(root, 'files/objects', key)).toString()).toBe('abc');
    expect(statSync(join(root, 'files/objects', key.slice(0, 2))).mode & 0o777).toBe(0o700);
  });

  test('a storage failure rejects with a 503 "File storage unavailable" naming the reason, never the path', async () => {
    const dir = join(root, 'files');
    await new LocalFileStore(dir).start();
    rmSync(join(dir, 'tmp'), { recursive: true });
    writeFileSync(join(dir, 'tmp'), 'not a directory');
    const body = streamOf(randomBytes(10));
    const err = await new LocalFileStore(dir).write(body).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ServiceUnavailableError);
    expect((err as ServiceUnavailableError).statusCode).toBe(503);
    expect((err as Error).message).toBe('File storage unavailable: not a directory (ENOTDIR)');
    expect(body.destroyed).toBe(true);
  });

  test('a temp file swept before its commit makes the commit a 503, and discard still succeeds', async () => {
    const store = new LocalFileStore(join(root, 'files'));
    await store.start();
    const pending = await store.write(Readable.from([Buffer.from('abc')]));
    for (const name of readdirSync(store.tmpDir)) rmSync(join(store.tmpDir, name));
    await expect(pending.commit()).rejects.toThrow(/^File storage unavailable: the temporary content is gone/);
    await pending.discard();
    expect(readdirSync(store.objectsDir, { recursive: true }).filter((name) => String(name).includes('/'))).toEqual([]);
  });
});

describe('S3 file store: an unreachable store', () => {
  test('the start-up check names the reason; writes past one part and commits of short ones reject as 503', async () => {
    const port = await closedPort();
    const store = new S3FileStore(s3Config('no-such-bucket', { endpoint: `http://127.0.0.1:${port}` }));
    try {
      expect(await store.check()).toBe('the S3 store cannot be reached: connection refused (ECONNREFUSED)');
      const err = await store.write(streamOf(randomBytes(PART + 1))).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ServiceUnavailableError);
      expect((err as Error).message).toBe('File storage unavailable: the S3 store cannot be reached: connection refused (ECONNREFUSED)');
      const short: PendingObject = await store.write(streamOf(randomBytes(10)));
      await expect(short.commit()).rejects.toThrow(/^File storage unavailable: the S3 store cannot be reached/);
      await short.discard();
      await expect(store.read(`xfer/objects/${'0'.repeat(32)}`)).rejects.toBeInstanceOf(ServiceUnavailableError);
      await expect(store.sweep(0)).rejects.toBeInstanceOf(ServiceUnavailableError);
    } finally {
      await store.close();
    }
  });

  test('a wrong secret key: the check says so and a write past one part rejects as 503 without the secret', async () => {
    const store = new S3FileStore(s3Config('any-bucket', { secretAccessKey: 'wrong-secret-key' }));
    try {
      expect(await store.check()).toMatch(/access denied|does not accept the access key/);
      const err = await store.write(streamOf(randomBytes(PART + 1))).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ServiceUnavailableError);
      expect((err as Error).message).toMatch(/^File storage unavailable: the S3 store does not accept the access key \(SignatureDoesNotMatch\)$/);
    } finally {
      await store.close();
    }
  });

  test('a missing bucket is named by the check', async () => {
    const store = new S3FileStore(s3Config(`xfer-missing-${randomBytes(4).toString('hex')}`));
    try {
      expect(await store.check()).toMatch(/bucket does not exist|HTTP 404/);
    } finally {
      await store.close();
    }
  });
});

describe('file-store plugin', () => {
  test('decorates app.fileStore with the configured local store and sweeps day-old temp files at start', async () => {
    const root = mkdtempSync(join(tmpdir(), 'xfer-file-store-'));
    const dir = join(root, 'files');
    try {
      mkdirSync(join(dir, 'tmp'), { recursive: true });
      const old = join(dir, 'tmp', randomBytes(16).toString('hex'));
      const fresh = join(dir, 'tmp', randomBytes(16).toString('hex'));
      writeFileSync(old, 'left by a crash');
      writeFileSync(fresh, 'being written');
      const twoDaysAgo = new Date(Date.now() - 2 * 24 * 3600 * 1000);
      utimesSync(old, twoDaysAgo, twoDaysAgo);
      const logs: string[] = [];
      const app = await buildTestApp({ fileStore: { kind: 'local', dir } }, { logs });
      try {
        expect(app.fileStore.kind).toBe('local');
        // Logged once the sweep at start has gone through tmp/: what it kept stays.
        const line = await eventually(async () => logs.find((l) => l.includes('file store: removed temporary content')), 'the sweep at start');
        expect(JSON.parse(line).removed).toBe(1);
        expect(existsSync(old)).toBe(false);
        expect(existsSync(fresh)).toBe(true);
      } finally {
        await app.close();
      }
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });

  test('an unreachable S3 bucket does not stop the start', async () => {
    const port = await closedPort();
    const app = await buildTestApp({ fileStore: s3Config('no-such-bucket', { endpoint: `http://127.0.0.1:${port}` }) });
    try {
      expect(app.fileStore.kind).toBe('s3');
    } finally {
      await app.close();
    }
  });
});

/** A local port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}
