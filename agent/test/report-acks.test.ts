import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AgentToServer, frame, type AgentMessage } from '@xfer/shared';
import { createLogger } from '../src/logger.js';
import { spillDir } from '../src/session/report-queue.js';
import { AgentSession, type SessionMessage } from '../src/session/session.js';
import { LogLines, TEST_TOKEN } from './helpers/test-agent.js';
import { TestControlPlane } from './helpers/test-control-plane.js';
import { until } from './helpers/until.js';

/** Job reports are held until acknowledged, sent again after every reconnect, and spilled to disk past the memory bound. */
let server: TestControlPlane;
let state: string;
beforeEach(async () => {
  server = await TestControlPlane.start();
  state = mkdtempSync(join(tmpdir(), 'xfer-agent-state-'));
});
afterEach(async () => {
  await server.close();
  rmSync(state, { recursive: true, force: true });
});

const counters = { files_total: 5000, files_transferred: 0, files_skipped: 0, files_failed: 0, bytes_transferred: 0 };
const file = (i: number) => ({ path: `dir/some-longer-name-${i}.bin`, status: 'copied' as const, size: i, sha256: 'a'.repeat(64) });
const progress = (job: string, from: number, count: number) => frame(AgentToServer, 'job.progress', {
  job_id: job, ...counters, files_transferred: from + count, listing_done: false, files: Array.from({ length: count }, (_, i) => file(from + i)),
}) as AgentMessage;

function session(memoryBytes = 8 * 1024 * 1024) {
  const log = new LogLines();
  /** What the session handed on (every message but welcome and ack), in order. */
  const received: SessionMessage[] = [];
  const s = new AgentSession({
    url: server.connectUrl, token: TEST_TOKEN, log: createLogger('debug', log),
    hello: () => ({ version: 't', hostname: 'h', connector_types: [], running_jobs: [], max_jobs: 1 }),
    onWelcome: () => {}, onMessage: (m) => void received.push(m), reconnectBaseMs: 10, reconnectMaxMs: 20,
    spillDir: spillDir(state, createLogger('silent')), outboxMemoryBytes: memoryBytes,
  });
  return { s, running: s.run(), received };
}


const filesOf = (messages: AgentMessage[]) => messages.flatMap((m) => (m.type === 'job.progress' ? m.payload.files.map((f) => f.path) : []));

test('a report not acknowledged is sent again after the reconnect; acknowledged ones are not; nothing is held after the acks', async () => {
  const { s, running, received } = session();
  const first = await server.connection(0);
  const hello = await first.welcome({ acks: true });
  expect(hello.payload.acks).toBe(true);
  await until('the session connected', () => s.connected);
  s.send(progress('j1', 0, 5));
  s.send(progress('j1', 5, 5));

  const [p1, p2] = [await first.next('job.progress'), await first.next('job.progress')];
  expect([p1.payload.seq, p2.payload.seq]).toEqual([1, 2]);
  first.send('ack', { seqs: [1] });
  // The session handles its messages in order: once a later one reached its caller, the ack is taken.
  first.send('ping', { request_id: 'after-the-ack' });
  await until('the ping sent after the ack answered', () => received.some((m) => m.type === 'ping' && m.payload.request_id === 'after-the-ack'));
  first.ws.terminate();
  const second = await server.connection(1);
  await second.welcome({ acks: true });
  // Only the unacknowledged one, with its number, then what comes next.
  expect((await second.next('job.progress')).payload).toMatchObject({ seq: 2, files_transferred: 10 });
  s.send(frame(AgentToServer, 'job.completed', { job_id: 'j1', ...counters, files_transferred: 10 }) as AgentMessage);
  expect((await second.next('job.completed')).payload.seq).toBe(3);
  expect(await s.flushed(200)).toBe(false);
  second.send('ack', { seqs: [2, 3] });
  expect(await s.flushed(2000)).toBe(true);
  expect(second.all('job.progress')).toHaveLength(1);
  await s.stop();
  await running;
});

test('past the memory bound, reports wait on disk while disconnected; all of them arrive, in order, as acks free room', async () => {
  const { s, running } = session(16 * 1024);
  const first = await server.connection(0);
  await first.welcome({ acks: true });
  first.ws.terminate();
  const second = await server.connection(1);
  await second.next('hello');
  // Disconnected until the welcome below: 3000 file results (~300 KB) against a 16 KiB bound.
  for (let i = 0; i < 3000; i += 5) s.send(progress('j1', i, 5));
  s.send(frame(AgentToServer, 'job.completed', { job_id: 'j1', ...counters, files_transferred: 3000 }) as AgentMessage);
  const own = join(state, 'outbox', String(process.pid));
  expect(readdirSync(own).length).toBeGreaterThan(0);

  second.send('welcome', { agent_id: 'a'.repeat(24), heartbeat_ms: 30_000, lease_ms: 90_000, abort_jobs: [], acks: true });
  // Acknowledge everything that arrives, as the control plane does once it persisted it.
  const acked = new Set<number>();
  const deadline = Date.now() + 20_000;
  while (!second.received.some((m) => m.type === 'job.completed')) {
    const fresh = second.received.flatMap((m) => ('seq' in m.payload && m.payload.seq && !acked.has(m.payload.seq) ? [m.payload.seq] : []));
    if (fresh.length > 0) {
      for (const seq of fresh) acked.add(seq);
      second.send('ack', { seqs: fresh });
    }
    if (Date.now() > deadline) throw new Error('the held reports did not all arrive');
    await new Promise((r) => setTimeout(r, 20));
  }
  const paths = filesOf(second.received);
  expect(paths).toEqual(Array.from({ length: 3000 }, (_, i) => file(i).path));
  const seqs = second.received.flatMap((m) => ('seq' in m.payload && m.payload.seq ? [m.payload.seq] : []));
  expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
  second.send('ack', { seqs: [seqs.at(-1)!] });
  expect(await s.flushed(2000)).toBe(true);
  expect(readdirSync(own)).toEqual([]);
  await s.stop();
  await running;
});

test('a control plane without acks: a report written to the socket is done (the older protocol)', async () => {
  const { s, running } = session();
  const first = await server.connection(0);
  await first.welcome();
  s.send(progress('j1', 0, 5));
  expect((await first.next('job.progress')).payload.seq).toBe(1);
  expect(await s.flushed(2000)).toBe(true);
  await s.stop();
  await running;
});

test('spill directories of agent processes that no longer run are removed at start', () => {
  const stale = join(state, 'outbox', '999999999');
  mkdirSync(stale, { recursive: true });
  const own = spillDir(state, createLogger('silent'));
  expect(own).toBe(join(state, 'outbox', String(process.pid)));
  expect(existsSync(stale)).toBe(false);
});

test('the reconnect backoff never exceeds a quarter of the lease the last welcome announced', async () => {
  const log = new LogLines();
  const s = new AgentSession({
    url: server.connectUrl, token: TEST_TOKEN, log: createLogger('debug', log),
    hello: () => ({ version: 't', hostname: 'h', connector_types: [], running_jobs: [], max_jobs: 1 }),
    onWelcome: () => {}, onMessage: () => {}, reconnectBaseMs: 60_000, reconnectMaxMs: 120_000, random: () => 0.999,
  });
  const running = s.run();
  const first = await server.connection(0);
  await first.welcome({ lease_ms: 400 });
  await until('the session connected', () => s.connected);
  first.ws.terminate();
  // Without the cap this wait would be about 60 s.
  await (await server.connection(1)).welcome();
  expect(log.text).toMatch(/"retry_in_ms":100,"msg":"disconnected from the control plane; reconnecting"/);
  await s.stop();
  await running;
});
