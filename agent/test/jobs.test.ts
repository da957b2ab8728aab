import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { Transform } from 'node:stream';
import type { ConnectionSettings, FileResult } from '@xfer/shared';
import { ConnectorError, type Connector } from '../src/connectors/types.js';
import { MAX_CONNECTION_TESTS } from '../src/agent.js';
import { SHUTDOWN_ERROR } from '../src/jobs/job-runner.js';
import { assignPayload, deferred, fsConnectors, settings, testAgent } from './helpers/test-agent.js';
import { TestControlPlane, type AgentConnection } from './helpers/test-control-plane.js';
import { partFiles, rmTemp, snapshot, tempDir, writeTree } from './helpers/tree.js';
import { WrappedConnector } from './helpers/wrapped-connector.js';

let server: TestControlPlane;
let src: string;
let dst: string;
beforeEach(async () => {
  server = await TestControlPlane.start();
  src = tempDir('xfer-jsrc-');
  dst = tempDir('xfer-jdst-');
});
afterEach(async () => {
  await server.close();
  rmTemp(src);
  rmTemp(dst);
});

/**
 * Resolves when `gate` opens; rejects as soon as `signal` aborts, at once if it already has (as a
 * real connector's write does: a listener added to an aborted signal would never be called).
 */
function heldUntil(gate: Promise<void>, signal: AbortSignal | undefined): Promise<void> {
  if (signal?.aborted) return Promise.reject(new ConnectorError('TRANSIENT', 'aborted'));
  return Promise.race([
    gate,
    new Promise<void>((_, reject) => signal?.addEventListener('abort', () => reject(new ConnectorError('TRANSIENT', 'aborted')), { once: true })),
  ]);
}

/** Connectors whose destination writes wait at a gate the test opens; `started` resolves at the first write. */
function gatedConnectors() {
  const gate = deferred();
  const started = deferred();
  const closed = deferred();
  let closes = 0;
  const connectors = fsConnectors((inner, s) => {
    const wrapped = new WrappedConnector(inner);
    if (s.path === dst) {
      // Held until the gate opens, or until the write is aborted.
      wrapped.beforeWrite = async (_path, signal) => {
        started.resolve();
        await heldUntil(gate.promise, signal);
      };
    }
    const close = wrapped.close.bind(wrapped);
    wrapped.close = async () => {
      await close();
      if (++closes === 2) closed.resolve();
    };
    return wrapped as Connector;
  });
  return { connectors, gate, started, closed };
}

async function connected(overrides: Parameters<typeof testAgent>[1] = {}) {
  const { agent, log } = testAgent(server.connectUrl, overrides);
  const running = agent.run();
  const conn = await server.connection(0);
  await conn.welcome();
  return { agent, log, running, conn };
}

/** Like the registry: the fs connector for nfs, UNSUPPORTED for any other type. */
function registryLike(s: ConnectionSettings): Connector | Promise<Connector> {
  if (s.type !== 'nfs') throw new ConnectorError('UNSUPPORTED', `this agent has no connector for ${s.type} connections`);
  return fsConnectors().create(s);
}

/** Every FileResult of a job, across its progress messages. */
function fileResults(conn: AgentConnection, jobId: string): FileResult[] {
  return conn.all('job.progress').filter((m) => m.payload.job_id === jobId).flatMap((m) => m.payload.files);
}

describe('job runner', () => {
  test('assign → accepted → progress every 5 files → completed, with every file result reported once', async () => {
    writeTree(src, Object.fromEntries(Array.from({ length: 12 }, (_, i) => [`dir/file-${i}.txt`, `content ${i}`])));
    const { agent, running, conn } = await connected();
    conn.send('job.assign', assignPayload('job-1', src, dst, { destination_path: '/out' }));
    expect((await conn.next('job.accepted')).payload).toEqual({ job_id: 'job-1' });
    const done = await conn.next('job.completed');
    // Numbered by the session (held until acknowledged).
    expect(done.payload).toEqual({ job_id: 'job-1', seq: expect.any(Number), files_total: 12, files_transferred: 12, files_skipped: 0, files_failed: 0, files_deleted: 0, bytes_transferred: 12 * 9 + 2 });
    const results = fileResults(conn, 'job-1');
    expect(results.map((r) => r.path).sort()).toEqual(Array.from({ length: 12 }, (_, i) => `dir/file-${i}.txt`).sort());
    expect(results.every((r) => r.status === 'copied' && r.verified_by === 'reread' && /^[0-9a-f]{64}$/.test(r.sha256 ?? ''))).toBe(true);
    for (const m of conn.all('job.progress')) expect(m.payload.files.length).toBeLessThanOrEqual(5);
    // Counters only grow, and the last progress before the end says the listing is done.
    const progress = conn.all('job.progress');
    expect(progress.at(-1)!.payload.listing_done).toBe(true);
    const transferred = progress.map((m) => m.payload.files_transferred);
    expect(transferred).toEqual([...transferred].sort((a, b) => a - b));
    // The terminal message comes last.
    expect(conn.received.at(-1)!.type).toBe('job.completed');
    expect(snapshot(join(dst, 'out'))).toEqual(snapshot(src));
    await agent.shutdown('test');
    await running;
  });

  test('a job with failing files fails naming them, after the others were copied', async () => {
    writeTree(src, { 'ok.txt': 'ok', 'bad.txt': 'bad' });
    const connectors = fsConnectors((inner, s) => {
      if (s.path !== dst) return inner;
      const w = new WrappedConnector(inner);
      w.beforeWrite = (path) => {
        if (path.includes('bad.txt')) throw new ConnectorError('PERMISSION', 'bad.txt: permission denied');
      };
      return w;
    });
    const { agent, running, conn } = await connected({ connectors });
    conn.send('job.assign', assignPayload('job-f', src, dst));
    const failed = await conn.next('job.failed');
    expect(failed.payload).toEqual({
      job_id: 'job-f', seq: expect.any(Number), files_total: 2, files_transferred: 1, files_skipped: 0, files_failed: 1, files_deleted: 0, bytes_transferred: 2,
      error: '1 file failed: bad.txt (bad.txt: permission denied)',
    });
    expect(fileResults(conn, 'job-f').find((r) => r.path === 'bad.txt')).toMatchObject({ status: 'failed', error: 'bad.txt: permission denied' });
    await agent.shutdown('test');
    await running;
  });

  test('a job whose connection type this agent lacks fails with the reason', async () => {
    const { agent, running, conn } = await connected({ connectors: { types: () => ['nfs'], create: (s) => registryLike(s) } });
    conn.send('job.assign', assignPayload('job-u', src, dst, { destination: settings(dst, 'onedrive') }));
    expect((await conn.next('job.accepted')).payload.job_id).toBe('job-u');
    expect((await conn.next('job.failed')).payload).toMatchObject({ job_id: 'job-u', error: 'this agent has no connector for onedrive connections' });
    await agent.shutdown('test');
    await running;
  });

  test('job.cancel aborts every stream, removes partial files and answers job.cancelled', async () => {
    writeTree(src, { 'big.bin': Buffer.alloc(2_000_000, 1), 'other.bin': Buffer.alloc(10, 2) });
    const midStream = deferred();
    const connectors = fsConnectors((inner, s) => {
      if (s.path !== dst) return inner;
      const wrapped = new WrappedConnector(inner);
      wrapped.beforeWrite = async (path, signal) => {
        // other.bin waits before its write; big.bin is held after its first chunk, mid-file.
        if (!path.includes('big.bin')) return heldUntil(new Promise(() => {}), signal);
        let chunks = 0;
        // readableHighWaterMark 0: the second chunk is only taken once the store read the first,
        // so by then it has created the partial file.
        return new Transform({
          readableHighWaterMark: 0,
          transform(chunk: Buffer, _enc, callback) {
            if (++chunks === 1) return callback(null, chunk);
            midStream.resolve();
            heldUntil(new Promise(() => {}), signal).catch((err: Error) => callback(err));
          },
        });
      };
      return wrapped;
    });
    const { agent, running, conn } = await connected({ connectors });
    conn.send('job.assign', assignPayload('job-c', src, dst));
    await conn.next('job.accepted');
    await midStream.promise; // big.bin is partly written (and never let through)
    expect(partFiles(dst)).toHaveLength(1);
    conn.send('job.cancel', { job_id: 'job-c' });
    const cancelled = await conn.next('job.cancelled');
    expect(cancelled.payload).toMatchObject({ job_id: 'job-c', files_transferred: 0 });
    expect(partFiles(dst)).toEqual([]);
    expect(existsSync(join(dst, 'big.bin'))).toBe(false);
    // A cancel for a job not running here is acknowledged at once.
    conn.send('job.cancel', { job_id: 'unknown-job' });
    expect((await conn.next('job.cancelled', (m) => m.payload.job_id === 'unknown-job')).payload.files_total).toBe(0);
    await agent.shutdown('test');
    await running;
  });

  test('a cancel landing while a file opens its source starts no write and still answers job.cancelled', async () => {
    writeTree(src, { 'a.bin': Buffer.alloc(1000, 1), 'b.bin': Buffer.alloc(10, 2) });
    const writeStarted = deferred();
    const secondRead = deferred();
    const aborted = deferred();
    let reads = 0;
    const writes: string[] = [];
    const connectors = fsConnectors((inner, s) => {
      const wrapped = new WrappedConnector(inner);
      if (s.path === src) {
        // The second file's source opens only once the job's signal has aborted.
        const read = wrapped.read.bind(wrapped);
        wrapped.read = async (path, o) => {
          if (++reads > 1) {
            secondRead.resolve();
            await aborted.promise;
          }
          return read(path, o);
        };
      } else {
        wrapped.beforeWrite = async (path, signal) => {
          writes.push(path);
          signal?.addEventListener('abort', () => aborted.resolve(), { once: true });
          writeStarted.resolve();
          await heldUntil(new Promise(() => {}), signal);
        };
      }
      return wrapped as Connector;
    });
    const { agent, running, conn } = await connected({ connectors });
    conn.send('job.assign', assignPayload('job-o', src, dst));
    await Promise.all([writeStarted.promise, secondRead.promise]); // one file writing, the other opening
    conn.send('job.cancel', { job_id: 'job-o' });
    expect((await conn.next('job.cancelled')).payload).toMatchObject({ job_id: 'job-o', files_transferred: 0, files_failed: 0 });
    expect(writes).toHaveLength(1);
    expect(partFiles(dst)).toEqual([]);
    await agent.shutdown('test');
    await running;
  });

  test('an assign beyond max_jobs is refused as busy; a repeated assign of a running job is acknowledged again', async () => {
    writeTree(src, { 'a.txt': 'a' });
    const { connectors, gate, started } = gatedConnectors();
    const { agent, running, conn } = await connected({ connectors, maxJobs: 1 });
    conn.send('job.assign', assignPayload('job-1', src, dst));
    await started.promise;
    conn.send('job.assign', assignPayload('job-2', src, dst));
    expect((await conn.next('job.failed')).payload).toMatchObject({ job_id: 'job-2', error: 'agent busy: already running 1 of max_jobs 1' });
    conn.send('job.assign', assignPayload('job-1', src, dst));
    await conn.next('job.accepted');
    await conn.next('job.accepted', (m) => m.payload.job_id === 'job-1');
    gate.resolve();
    expect((await conn.next('job.completed')).payload.job_id).toBe('job-1');
    expect(conn.all('job.completed')).toHaveLength(1);
    await agent.shutdown('test');
    await running;
  });

  test('a job that ends while disconnected reports after the next welcome, and the new hello lists it while it runs', async () => {
    writeTree(src, { 'a.txt': 'a', 'b.txt': 'b' });
    const { connectors, gate, started, closed } = gatedConnectors();
    const { agent, running, conn } = await connected({ connectors });
    conn.send('job.assign', assignPayload('job-r', src, dst));
    await started.promise;
    conn.ws.terminate();
    const second = await server.connection(1);
    const hello = await second.next('hello');
    expect(hello.payload.running_jobs).toEqual(['job-r']);
    gate.resolve();
    await closed.promise; // the job ended (its connectors are closed) while the session waits for welcome
    await new Promise((resolve) => setImmediate(resolve));
    second.send('welcome', { agent_id: 'a'.repeat(24), heartbeat_ms: 30_000, lease_ms: 90_000, abort_jobs: [] });
    expect((await second.next('job.completed')).payload).toMatchObject({ job_id: 'job-r', files_transferred: 2 });
    expect(fileResults(second, 'job-r').map((r) => r.path).sort()).toEqual(['a.txt', 'b.txt']);
    await agent.shutdown('test');
    await running;
  });

  test('welcome.abort_jobs aborts those running jobs (reported as cancelled)', async () => {
    writeTree(src, { 'a.txt': 'a' });
    const { connectors, started } = gatedConnectors();
    const { agent, running, conn } = await connected({ connectors });
    conn.send('job.assign', assignPayload('job-x', src, dst));
    await started.promise;
    conn.ws.terminate();
    const second = await server.connection(1);
    await second.welcome({ abort_jobs: ['job-x', 'job-long-gone'] });
    expect((await second.next('job.cancelled')).payload.job_id).toBe('job-x');
    expect(partFiles(dst)).toEqual([]);
    await agent.shutdown('test');
    await running;
  });

  test('connection.test runs connector.test() and answers with success, message and latency', async () => {
    const { agent, running, conn } = await connected({
      connectors: { types: () => ['nfs'], create: (s) => registryLike(s) },
    });
    conn.send('connection.test', { request_id: 't1', connection: settings(src) });
    const ok = await conn.next('connection.test.result');
    expect(ok.payload).toEqual({ request_id: 't1', success: true, message: `directory ${src} is readable and writable`, latency_ms: expect.any(Number) });
    conn.send('connection.test', { request_id: 't2', connection: settings(join(src, 'missing')) });
    expect((await conn.next('connection.test.result')).payload).toMatchObject({ request_id: 't2', success: false, message: expect.stringContaining('does not exist') });
    conn.send('connection.test', { request_id: 't3', connection: settings(src, 'sftp') });
    expect((await conn.next('connection.test.result')).payload).toMatchObject({ request_id: 't3', success: false, message: 'this agent has no connector for sftp connections' });
    await agent.shutdown('test');
    await running;
  });

  test(`a flood of connection.test runs at most ${MAX_CONNECTION_TESTS} at once; the others are answered "agent busy" at once`, async () => {
    const release = deferred();
    let testing = 0;
    const connectors = fsConnectors((inner) => {
      const wrapped = new WrappedConnector(inner);
      wrapped.test = async () => {
        testing++;
        await release.promise;
        return 'held, then fine';
      };
      return wrapped;
    });
    const { agent, running, conn } = await connected({ connectors });
    const flood = MAX_CONNECTION_TESTS + 5;
    for (let i = 0; i < flood; i++) conn.send('connection.test', { request_id: `t${i}`, connection: settings(src) });
    for (let i = MAX_CONNECTION_TESTS; i < flood; i++) {
      expect((await conn.next('connection.test.result', (m) => m.payload.request_id === `t${i}`)).payload)
        .toMatchObject({ success: false, message: `agent busy: already testing ${MAX_CONNECTION_TESTS} connections` });
    }
    while (testing < MAX_CONNECTION_TESTS) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(testing).toBe(MAX_CONNECTION_TESTS);
    release.resolve();
    for (let i = 0; i < MAX_CONNECTION_TESTS; i++) {
      expect((await conn.next('connection.test.result', (m) => m.payload.request_id === `t${i}`)).payload).toMatchObject({ success: true });
    }
    // Slots free again once answered.
    conn.send('connection.test', { request_id: 'after', connection: settings(src) });
    expect((await conn.next('connection.test.result', (m) => m.payload.request_id === 'after')).payload.success).toBe(true);
    await agent.shutdown('test');
    await running;
  });
});

describe('drain on shutdown', () => {
  test('running jobs finish within the drain timeout, report, and then the socket closes with 1000', async () => {
    writeTree(src, { 'a.txt': 'a' });
    const { connectors, gate, started } = gatedConnectors();
    const { agent, running, conn } = await connected({ connectors });
    conn.send('job.assign', assignPayload('job-d', src, dst));
    await started.promise;
    const stopping = agent.shutdown('SIGTERM');
    // While draining, new jobs are refused.
    conn.send('job.assign', assignPayload('job-late', src, dst));
    expect((await conn.next('job.failed')).payload).toMatchObject({ job_id: 'job-late', error: 'agent shutting down: not taking new jobs' });
    gate.resolve();
    expect((await conn.next('job.completed')).payload.job_id).toBe('job-d');
    await stopping;
    expect((await conn.closed).code).toBe(1000);
    expect(await running).toEqual({ code: 0 });
  });

  test('jobs still running at the drain timeout are aborted and reported as failed "agent shutting down", interrupted (for another agent to take over)', async () => {
    writeTree(src, { 'a.txt': 'a' });
    const { connectors, started } = gatedConnectors();
    const { agent, running, conn, log } = await connected({ connectors, drainTimeoutMs: 100 });
    conn.send('job.assign', assignPayload('job-s', src, dst));
    await started.promise;
    await agent.shutdown('SIGTERM');
    expect((await conn.next('job.failed')).payload).toMatchObject({ job_id: 'job-s', error: SHUTDOWN_ERROR, interrupted: true });
    expect((await conn.closed).code).toBe(1000);
    expect(await running).toEqual({ code: 0 });
    expect(partFiles(dst)).toEqual([]);
    expect(log.text).toContain('drain timeout reached');
  });
});
