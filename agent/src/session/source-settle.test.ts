import { spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { Transform } from 'node:stream';
import type { ConnectionSettings, SettleResult } from '@xfer/shared';
import type { Connector } from '../connectors/types.js';
import { registryConnectors, type ConnectorSource } from '../lib/connector-source.js';
import { MAX_SOURCE_SETTLES } from '../agent.js';
import { settleSourceFiles, type SettleRequest } from './source-settle.js';
import { RawBlob } from '../../test/conformance/blob.raw.js';
import { RawS3 } from '../../test/conformance/s3.raw.js';
import { uniqueName } from '../../test/conformance/helpers.js';
import { deferred, fsConnectors, settings as fsSettings, testAgent } from '../../test/helpers/test-agent.js';
import { TestControlPlane } from '../../test/helpers/test-control-plane.js';
import { fsConnector } from '../../test/helpers/tree.js';
import { WrappedConnector } from '../../test/helpers/wrapped-connector.js';

/**
 * Moving and deleting a transfer's verified source files (`source.settle`) against real stores:
 * a local directory (fs connector), the OpenSSH sftp server (rename) and versitygw S3 (copy, then
 * delete). Each test has a folder or bucket of its own.
 */

const env = process.env;
const sha = (data: Buffer | string) => createHash('sha256').update(data).digest('hex');

/** A store of the tests: a connection to it, its connectors, and ways to look at it that do not go through them. */
interface Store {
  readonly settings: ConnectionSettings;
  readonly connectors: ConnectorSource;
  put(rel: string, data: Buffer | string): Promise<void>;
  /** SHA-256 of the file's content, or null when there is none. */
  sha256(rel: string): Promise<string | null>;
  /** Every file, sorted. */
  files(): Promise<string[]>;
  cleanup(): Promise<void>;
}

/** A directory of this host: served by the fs connector, or by the sftp server (whose user then owns it). */
class DirStore implements Store {
  readonly dir: string;
  constructor(readonly settings: ConnectionSettings, readonly connectors: ConnectorSource, private readonly owner?: string) {
    this.dir = settings.path;
  }

  static fs(): DirStore {
    const dir = mkdtempSync(join(tmpdir(), 'xfer-settle-'));
    return new DirStore(fsSettings(dir), { types: () => ['nfs'], create: (s) => fsConnector(s.path) });
  }

  static sftp(): DirStore {
    const dir = join(env.XFER_TEST_SFTP_ROOT!, uniqueName('settle'));
    mkdirSync(dir, { recursive: true });
    const settings: ConnectionSettings = {
      id: '000000000000000000000151', name: 'sftp settle', type: 'sftp', host: env.XFER_TEST_SFTP_HOST!, port: Number(env.XFER_TEST_SFTP_PORT),
      path: dir, options: {}, agent_id: null, credentials: { username: env.XFER_TEST_SFTP_USER!, password: env.XFER_TEST_SFTP_PASSWORD! },
    };
    const store = new DirStore(settings, registryConnectors, env.XFER_TEST_SFTP_USER!);
    store.chown();
    return store;
  }

  async put(rel: string, data: Buffer | string): Promise<void> {
    mkdirSync(dirname(join(this.dir, rel)), { recursive: true });
    writeFileSync(join(this.dir, rel), data);
    this.chown();
  }

  async sha256(rel: string): Promise<string | null> {
    try {
      return sha(readFileSync(join(this.dir, rel)));
    } catch {
      return null;
    }
  }

  async files(): Promise<string[]> {
    return readdirSync(this.dir, { recursive: true, withFileTypes: true })
      .filter((e) => e.isFile())
      .map((e) => relative(this.dir, join(e.parentPath ?? e.path, e.name)))
      .sort();
  }

  async cleanup(): Promise<void> {
    rmSync(this.dir, { recursive: true, force: true });
  }

  private chown(): void {
    // The sftp user moves files between folders it must be able to write.
    if (this.owner) spawnSync('chown', ['-R', `${this.owner}:`, this.dir]);
  }
}

/** A bucket of its own on versitygw (S3), or a container on Azurite (Blob); looked at through a plain client. */
class ObjectStore implements Store {
  private constructor(readonly settings: ConnectionSettings, private readonly raw: RawS3 | RawBlob, readonly connectors: ConnectorSource) {}

  private static connectors(wrap?: (c: Connector) => Connector): ConnectorSource {
    return {
      types: () => ['s3', 'blob'],
      create: async (s) => {
        const connector = await registryConnectors.create(s);
        return wrap ? wrap(connector) : connector;
      },
    };
  }

  static async s3(wrap?: (c: Connector) => Connector): Promise<ObjectStore> {
    const bucket = uniqueName('settle');
    const raw = new RawS3({ endpoint: env.XFER_TEST_S3_ENDPOINT!, accessKeyId: env.XFER_TEST_S3_ACCESS_KEY!, secretAccessKey: env.XFER_TEST_S3_SECRET_KEY! }, bucket, '');
    await raw.createBucket();
    return new ObjectStore(s3Settings(bucket), raw, ObjectStore.connectors(wrap));
  }

  static async blob(): Promise<ObjectStore> {
    const container = uniqueName('settle');
    const raw = new RawBlob(env.XFER_TEST_BLOB_CONNECTION_STRING!, container, '');
    await raw.createContainer();
    const settings: ConnectionSettings = {
      id: '000000000000000000000153', name: 'blob settle', type: 'blob', host: null, port: 443, path: `/${container}`,
      options: {}, agent_id: null, credentials: { connection_string: env.XFER_TEST_BLOB_CONNECTION_STRING! },
    };
    return new ObjectStore(settings, raw, ObjectStore.connectors());
  }

  put(rel: string, data: Buffer | string): Promise<void> {
    return this.raw.put(rel, Buffer.from(data));
  }

  sha256(rel: string): Promise<string | null> {
    return this.raw.sha256(rel);
  }

  files(): Promise<string[]> {
    return this.raw.list('');
  }

  cleanup(): Promise<void> {
    return this.raw.destroy();
  }
}

function s3Settings(bucket: string, secret = env.XFER_TEST_S3_SECRET_KEY!): ConnectionSettings {
  return {
    id: '000000000000000000000152', name: 's3 settle', type: 's3', host: env.XFER_TEST_S3_HOST!, port: Number(env.XFER_TEST_S3_PORT), path: `/${bucket}`,
    options: { secure: false }, agent_id: null,
    credentials: { access_key_id: env.XFER_TEST_S3_ACCESS_KEY!, secret_access_key: secret, region: 'us-east-1' },
  };
}

type Request = Omit<SettleRequest, 'connection'>;

function settle(store: Store, request: Request, options?: Parameters<typeof settleSourceFiles>[2]) {
  return settleSourceFiles(store.connectors, { connection: store.settings, ...request }, options);
}

/** Results in path order, for comparing (the agent answers in any order). */
const sorted = (results: SettleResult[]) => [...results].sort((a, b) => (a.path < b.path ? -1 : 1));
const file = (path: string, data: Buffer | string) => ({ path, size: Buffer.byteLength(data) });

describe.each([
  ['fs (local directory, rename)', async (): Promise<Store> => DirStore.fs()],
  ['sftp (rename)', async (): Promise<Store> => DirStore.sftp()],
  ['s3 (copy, then delete)', async (): Promise<Store> => ObjectStore.s3()],
])('settling source files on %s', (_name, makeStore) => {
  let store: Store;
  beforeEach(async () => {
    store = await makeStore();
  });
  afterEach(async () => {
    await store.cleanup();
  });

  const a = 'alpha,1\n';
  const b = 'bravo,22\n';
  const c = randomBytes(3000);

  test('a move puts a folder\'s files under `to` with their sub-paths; a repeat says moved again and loses nothing', async () => {
    await store.put('in/a.csv', a);
    await store.put('in/sub/b.csv', b);
    await store.put('in/sub/deeper/c.bin', c);
    await store.put('in/keep.txt', 'not part of the transfer');
    const request: Request = { action: 'move', source_path: '/in', to: '/done/2026', files: [file('a.csv', a), file('sub/b.csv', b), file('sub/deeper/c.bin', c)] };
    const first = await settle(store, request);
    expect(first.error).toBeUndefined();
    expect(sorted(first.results)).toEqual([{ path: 'a.csv', outcome: 'moved' }, { path: 'sub/b.csv', outcome: 'moved' }, { path: 'sub/deeper/c.bin', outcome: 'moved' }]);
    const after = ['done/2026/a.csv', 'done/2026/sub/b.csv', 'done/2026/sub/deeper/c.bin', 'in/keep.txt'];
    expect(await store.files()).toEqual(after);
    expect(await store.sha256('done/2026/a.csv')).toBe(sha(a));
    expect(await store.sha256('done/2026/sub/deeper/c.bin')).toBe(sha(c));

    const again = await settle(store, request);
    expect(sorted(again.results).map((r) => r.outcome)).toEqual(['moved', 'moved', 'moved']);
    expect(await store.files()).toEqual(after);
    expect(await store.sha256('done/2026/sub/b.csv')).toBe(sha(b));
  });

  test('a one-file source is moved under `to` by its name; another name is refused', async () => {
    await store.put('reports/r.csv', a);
    const { results } = await settle(store, { action: 'move', source_path: 'reports/r.csv', to: 'archive', files: [file('r.csv', a), file('other.csv', b)] });
    expect(sorted(results)).toEqual([
      { path: 'other.csv', outcome: 'failed', error: expect.stringContaining('whose name is not other.csv') },
      { path: 'r.csv', outcome: 'moved' },
    ]);
    expect(await store.files()).toEqual(['archive/r.csv']);
    // Repeated: the source path is gone, the target holds the file.
    expect((await settle(store, { action: 'move', source_path: 'reports/r.csv', to: 'archive', files: [file('r.csv', a)] })).results).toEqual([{ path: 'r.csv', outcome: 'moved' }]);
  });

  test('a file of another size is changed and left alone; a missing one is gone; a folder in its place fails', async () => {
    await store.put('in/a.csv', 'a new, longer version of the file');
    await store.put('in/d/inside.txt', 'x');
    for (const action of ['move', 'delete'] as const) {
      const { results } = await settle(store, { action, source_path: 'in', ...(action === 'move' ? { to: 'done' } : {}), files: [file('a.csv', a), file('missing.csv', b), { path: 'd', size: 0 }] });
      expect(sorted(results)).toEqual([
        { path: 'a.csv', outcome: 'changed' },
        { path: 'd', outcome: 'failed', error: 'in/d is a folder, not a file' },
        { path: 'missing.csv', outcome: 'gone' },
      ]);
    }
    expect(await store.files()).toEqual(['in/a.csv', 'in/d/inside.txt']);
    expect(await store.sha256('in/a.csv')).toBe(sha('a new, longer version of the file'));
    // A source path that is gone: every file is gone (or moved, where its target holds it).
    await store.put('done/b.csv', b);
    const { results } = await settle(store, { action: 'move', source_path: 'nothing-here', to: 'done', files: [file('a.csv', a), file('b.csv', b)] });
    expect(sorted(results)).toEqual([{ path: 'a.csv', outcome: 'gone' }, { path: 'b.csv', outcome: 'moved' }]);
  });

  test('hostile paths are refused before the store is touched; nothing outside the source moves or goes', async () => {
    await store.put('in/a.csv', a);
    await store.put('secret.txt', 'outside the source folder');
    const hostile = ['../secret.txt', 'a//b', './a.csv', 'sub/../../secret.txt', 'a.csv/', '..', 'x\\..\\..\\secret.txt', 'a\u0000b'];
    for (const action of ['move', 'delete'] as const) {
      const { results, error } = await settle(store, { action, source_path: 'in', ...(action === 'move' ? { to: 'done' } : {}), files: hostile.map((path) => ({ path, size: 8 })) });
      expect(error).toBeUndefined();
      expect(results).toHaveLength(hostile.length);
      for (const r of results) expect(r).toEqual({ path: r.path, outcome: 'failed', error: expect.stringMatching(/^refused: /) });
    }
    expect(await store.files()).toEqual(['in/a.csv', 'secret.txt']);
    // A `to` outside the connection's base path refuses the whole request.
    const outside = await settle(store, { action: 'move', source_path: 'in', to: '../../elsewhere', files: [file('a.csv', a)] });
    expect(outside).toEqual({ results: [], error: expect.stringMatching(/^to: .*escapes/) });
    // A target that is the file itself.
    expect((await settle(store, { action: 'move', source_path: 'in', to: '/in/', files: [file('a.csv', a)] })).results)
      .toEqual([{ path: 'a.csv', outcome: 'failed', error: 'the target in/a.csv is the file itself' }]);
    expect(await store.files()).toEqual(['in/a.csv', 'secret.txt']);
  });

  test('a delete removes the verified files only; a repeat says they are gone', async () => {
    await store.put('in/a.csv', a);
    await store.put('in/sub/b.csv', b);
    await store.put('in/keep.txt', 'stays');
    const request: Request = { action: 'delete', source_path: '/in', files: [file('a.csv', a), file('sub/b.csv', b)] };
    expect(sorted((await settle(store, request)).results)).toEqual([{ path: 'a.csv', outcome: 'deleted' }, { path: 'sub/b.csv', outcome: 'deleted' }]);
    expect(await store.files()).toEqual(['in/keep.txt']);
    expect(sorted((await settle(store, request)).results)).toEqual([{ path: 'a.csv', outcome: 'gone' }, { path: 'sub/b.csv', outcome: 'gone' }]);
  });

  test('a hundred files settle a few at a time, each answered once', async () => {
    const files = Array.from({ length: 100 }, (_, i) => ({ path: `f${String(i).padStart(3, '0')}.txt`, data: `file ${i}\n` }));
    for (const f of files) await store.put(`in/${f.path}`, f.data);
    const { results } = await settle(store, { action: 'move', source_path: 'in', to: 'out', files: files.map((f) => file(f.path, f.data)) });
    expect(sorted(results)).toEqual(files.map((f) => ({ path: f.path, outcome: 'moved' })));
    expect(await store.files()).toEqual(files.map((f) => `out/${f.path}`));
  });
});

describe('settling on an object store (copy, then delete)', () => {
  const a1 = 'first\n';
  let store: ObjectStore | undefined;
  afterEach(async () => {
    await store?.cleanup();
    store = undefined;
  });

  test('a copy that fails leaves the source where it is', async () => {
    const data = randomBytes(256 * 1024);
    store = await ObjectStore.s3((inner) => {
      const wrapped = new WrappedConnector(inner);
      // The source's stream breaks half-way (a dropped connection while reading).
      wrapped.onRead = (_path, stream) => {
        const broken = breakAfter(100_000);
        stream.on('error', (err) => broken.destroy(err));
        broken.on('close', () => stream.destroy());
        return stream.pipe(broken);
      };
      return wrapped;
    });
    await store.put('in/big.bin', data);
    const { results } = await settle(store, { action: 'move', source_path: 'in', to: 'done', files: [file('big.bin', data)] });
    expect(results).toEqual([{ path: 'big.bin', outcome: 'failed', error: expect.stringContaining('connection dropped') }]);
    expect(await store.files()).toEqual(['in/big.bin']);
    expect(await store.sha256('in/big.bin')).toBe(sha(data));
  });

  // Azurite's flat namespace holds both (versitygw's POSIX backend refuses a key below a file).
  test('a key that also has keys below it is not removed (the remove would take them too)', async () => {
    store = await ObjectStore.blob();
    await store.put('in/a', a1);
    await store.put('in/a/below.txt', 'below');
    for (const action of ['delete', 'move'] as const) {
      const { results } = await settle(store, { action, source_path: 'in', ...(action === 'move' ? { to: 'done' } : {}), files: [file('a', a1)] });
      expect(results).toEqual([{ path: 'a', outcome: 'failed', error: expect.stringContaining('has objects below it') }]);
    }
    expect(await store.files()).toEqual(['in/a', 'in/a/below.txt']);
  });

  test('a 64 MiB file is moved by streaming it to its target', async () => {
    let writes = 0;
    store = await ObjectStore.s3((inner) => {
      const wrapped = new WrappedConnector(inner);
      wrapped.beforeWrite = () => { writes++; };
      return wrapped;
    });
    const data = randomBytes(64 * 1024 * 1024);
    await store.put('in/large.bin', data);
    const { results } = await settle(store, { action: 'move', source_path: 'in', to: 'done', files: [file('large.bin', data)] });
    expect(results).toEqual([{ path: 'large.bin', outcome: 'moved' }]);
    expect(writes).toBe(1);
    expect(await store.files()).toEqual(['done/large.bin']);
    expect(await store.sha256('done/large.bin')).toBe(sha(data));
  }, 180_000);
});

/** Passes `bytes` bytes through, then fails as a dropped connection would. */
function breakAfter(bytes: number): Transform {
  let seen = 0;
  return new Transform({
    transform(chunk: Buffer, _enc, callback) {
      seen += chunk.length;
      if (seen > bytes) callback(new Error('connection dropped'));
      else callback(null, chunk);
    },
  });
}

describe('requests that cannot be carried out', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'xfer-settle-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  /** The fs connector on `dir`, wrapped so a test can hold it; counts `close`. */
  function held(hold?: Promise<void>) {
    const state = { closed: 0 };
    const connectors: ConnectorSource = {
      types: () => ['nfs'],
      create: (s) => {
        const wrapped = new WrappedConnector(fsConnector(s.path));
        if (hold) wrapped.rename = async () => hold;
        wrapped.close = async () => { state.closed++; };
        return wrapped;
      },
    };
    return { connectors, state };
  }

  test('a connection that cannot be opened is an error for the whole request, with no credential in it', async () => {
    const store = await ObjectStore.s3();
    try {
      const wrongSecret = `wrong-${randomBytes(12).toString('hex')}`;
      const settings = s3Settings(store.settings.path.slice(1), wrongSecret);
      const reply = await settleSourceFiles(registryConnectors, { connection: settings, action: 'delete', source_path: 'in', files: [{ path: 'a', size: 1 }] });
      expect(reply).toEqual({ results: [], error: expect.any(String) });
      expect(reply.error).not.toContain(wrongSecret);
    } finally {
      await store.cleanup();
    }
    const unsupported = await settleSourceFiles({ types: () => [], create: () => { throw new Error('this agent has no connector for smb connections'); } },
      { connection: fsSettings(dir, 'smb'), action: 'delete', source_path: '', files: [{ path: 'a', size: 1 }] });
    expect(unsupported).toEqual({ results: [], error: 'this agent has no connector for smb connections' });
  });

  test('a move without `to` is refused as a whole', async () => {
    const { connectors, state } = held();
    expect(await settleSourceFiles(connectors, { connection: fsSettings(dir), action: 'move', source_path: '', files: [{ path: 'a', size: 1 }] }))
      .toEqual({ results: [], error: 'to: a move needs the folder to move the files to' });
    expect(state.closed).toBe(0); // refused before any connector was made
  });

  test('the timeout answers the files not settled yet as failed, and closes the connector', async () => {
    writeFileSync(join(dir, 'a.csv'), 'a');
    const never = new Promise<void>(() => {});
    const { connectors, state } = held(never);
    const reply = await settleSourceFiles(connectors, { connection: fsSettings(dir), action: 'move', source_path: '', to: 'done', files: [{ path: 'a.csv', size: 1 }] }, { timeoutMs: 300 });
    expect(reply).toEqual({ results: [{ path: 'a.csv', outcome: 'failed', error: 'not settled within 0.3 s' }] });
    expect(state.closed).toBe(1);
  });

  test('an aborted request answers what it settled and fails the rest', async () => {
    for (const name of ['a', 'b', 'c', 'd', 'e', 'f']) writeFileSync(join(dir, name), name);
    const controller = new AbortController();
    const release = deferred();
    let renames = 0;
    const connectors: ConnectorSource = {
      types: () => ['nfs'],
      create: (s) => {
        const inner = fsConnector(s.path);
        const wrapped = new WrappedConnector(inner);
        // The first rename goes through; the others wait until the request is aborted.
        wrapped.rename = async (from, to, o) => {
          if (++renames === 1) return inner.rename(from, to, o);
          controller.abort();
          await release.promise;
        };
        return wrapped;
      },
    };
    const reply = await settleSourceFiles(connectors, { connection: fsSettings(dir), action: 'move', source_path: '', to: 'done', files: ['a', 'b', 'c', 'd', 'e', 'f'].map((path) => ({ path, size: 1 })) }, { signal: controller.signal, concurrency: 1 });
    release.resolve();
    expect(reply.results).toEqual([
      { path: 'a', outcome: 'moved' },
      ...['b', 'c', 'd', 'e', 'f'].map((path) => ({ path, outcome: 'failed', error: 'stopped before it was done (the agent is shutting down)' })),
    ]);
    expect(readdirSync(join(dir, 'done'))).toEqual(['a']);
  });
});

describe('the agent answers source.settle', () => {
  let server: TestControlPlane;
  let dir: string;
  beforeEach(async () => {
    server = await TestControlPlane.start();
    dir = mkdtempSync(join(tmpdir(), 'xfer-settle-agent-'));
  });
  afterEach(async () => {
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test('says so in hello, settles, answers busy beyond its bound, and logs counts without credentials', async () => {
    const release = deferred();
    const password = `pw-${randomBytes(8).toString('hex')}`;
    // Connections named "held" wait in stat until released: they fill the agent's bound.
    const connectors = fsConnectors((inner, s) => {
      if (!s.name.startsWith('held')) return inner;
      const wrapped = new WrappedConnector(inner);
      wrapped.stat = async () => { await release.promise; return null; };
      return wrapped;
    });
    const { agent, log } = testAgent(server.connectUrl, { connectors });
    const running = agent.run();
    const conn = await server.connection(0);
    expect((await conn.welcome()).payload.settle).toBe(true);

    writeFileSync(join(dir, 'a.csv'), 'a,b\n');
    conn.send('source.settle', { request_id: 's1', connection: { ...fsSettings(dir), credentials: { password } }, action: 'move', source_path: '/', to: '/done', files: [{ path: 'a.csv', size: 4 }, { path: '../up', size: 1 }] });
    const reply = await conn.next('source.settle.result', (m) => m.payload.request_id === 's1');
    expect(sorted(reply.payload.results)).toEqual([{ path: '../up', outcome: 'failed', error: expect.stringMatching(/^refused/) }, { path: 'a.csv', outcome: 'moved' }]);
    expect(readFileSync(join(dir, 'done', 'a.csv'), 'utf8')).toBe('a,b\n');

    const flood = MAX_SOURCE_SETTLES + 2;
    for (let i = 0; i < flood; i++) {
      conn.send('source.settle', { request_id: `h${i}`, connection: { ...fsSettings(dir), name: 'held', credentials: { password } }, action: 'delete', source_path: '/', files: [{ path: 'x', size: 1 }] });
    }
    for (let i = MAX_SOURCE_SETTLES; i < flood; i++) {
      expect((await conn.next('source.settle.result', (m) => m.payload.request_id === `h${i}`)).payload)
        .toEqual({ request_id: `h${i}`, results: [], error: `agent busy: already settling ${MAX_SOURCE_SETTLES} batches of files` });
    }
    release.resolve();
    for (let i = 0; i < MAX_SOURCE_SETTLES; i++) {
      expect((await conn.next('source.settle.result', (m) => m.payload.request_id === `h${i}`)).payload.results).toEqual([{ path: 'x', outcome: 'gone' }]);
    }
    expect(conn.invalid).toEqual([]);
    const line = log.lines.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.request_id === 's1');
    expect(line).toMatchObject({ msg: 'source files settled', action: 'move', files: 2, moved: 1, failed: 1 });
    expect(log.text).not.toContain(password);
    await agent.shutdown('test');
    await running;
  });
});
