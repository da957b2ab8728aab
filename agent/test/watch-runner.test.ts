import { setTimeout as sleep } from 'node:timers/promises';
import { AgentAccess } from '../src/connectors/access.js';
import { connectorTypes, createConnector } from '../src/connectors/index.js';
import type { Connector, Entry } from '../src/connectors/types.js';
import type { ConnectorSource } from '../src/lib/connector-source.js';
import { MAX_FOUND_PER_REPORT, type AssignedWatcher, type ConnectionSettings, type FoundFile, type WatchSpec } from '@xfer/shared';
import type { AgentOptions } from '../src/agent.js';
import { testAgent } from './helpers/test-agent.js';
import { TestControlPlane, type AgentConnection } from './helpers/test-control-plane.js';
import { allowingRoots, rmTemp, tempDir, writeTree } from './helpers/tree.js';
import { S3WatchStore, SftpWatchStore } from './helpers/watch-stores.js';
import { WrappedConnector } from './helpers/wrapped-connector.js';
import { until } from './helpers/until.js';

/**
 * The agent's side of watchers, end to end over a real WebSocket: the test control plane sends
 * `watch.set`, the agent polls the real sftp and S3 test servers through its real connector
 * registry and access rules, and reports `watch.found` (held until acknowledged) and
 * `watch.polled`. Polls come every 300 ms here (`pollIntervalMs`; the protocol's minimum is 10 s).
 */
const POLL_MS = 300;
const W1 = '0000000000000000000000a1';
const W2 = '0000000000000000000000a2';
const W3 = '0000000000000000000000a3';

let server: TestControlPlane;
let stores: { cleanup(): Promise<void> }[];
let stops: (() => Promise<void>)[];
beforeEach(async () => {
  server = await TestControlPlane.start();
  stores = [];
  stops = [];
});
afterEach(async () => {
  for (const stop of stops) await stop();
  // Every frame the agent sent passed the protocol's schemas (a test waiting for one that did not times out: this says why).
  const invalid = server.connections.flatMap((c) => c.invalid);
  await server.close();
  for (const store of stores) await store.cleanup();
  expect(invalid).toEqual([]);
});

function sftpStore(): SftpWatchStore {
  const store = new SftpWatchStore();
  stores.push(store);
  return store;
}

function watcher(id: string, connection: ConnectionSettings, spec: Partial<WatchSpec> = {}, over: Partial<AssignedWatcher> = {}): AssignedWatcher {
  return {
    id, revision: 1, connection, poll_interval_seconds: 10,
    spec: { path: '', pattern: '*', recursive: false, stable_seconds: 0, include_existing: false, ...spec },
    ...over,
  };
}

/**
 * The real connector registry, counting the connectors made and open per connection id, and
 * optionally wrapping them; the agent's access rules still reach every connector (ConnectorContext).
 */
function countingRegistry(wrap?: (c: Connector) => Connector) {
  const made = new Map<string, number>();
  let open = 0;
  let maxOpen = 0;
  const source: ConnectorSource = {
    types: connectorTypes,
    create: async (settings, context) => {
      made.set(settings.id, (made.get(settings.id) ?? 0) + 1);
      const inner = await createConnector(settings, context);
      open++;
      maxOpen = Math.max(maxOpen, open);
      const connector = wrap ? wrap(inner) : inner;
      const close = connector.close.bind(connector);
      connector.close = async () => {
        open--;
        await close();
      };
      return connector;
    },
  };
  return { source, made: (id: string) => made.get(id) ?? 0, maxOpen: () => maxOpen, open: () => open };
}

async function startAgent(over: Partial<AgentOptions> = {}) {
  const { agent, log } = testAgent(server.connectUrl, { connectors: undefined, watch: { firstPollDelayMs: 0, pollIntervalMs: POLL_MS }, ...over });
  const running = agent.run();
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    await agent.shutdown('test');
    await running;
  };
  stops.push(stop);
  const conn = await server.connection(0);
  const hello = await conn.welcome({ acks: true });
  return { agent, log, conn, hello, stop };
}

/** Acknowledges every numbered report received on `conn` so far that was not acknowledged yet. */
function ackAll(conn: AgentConnection, acked = new Set<number>()): Set<number> {
  const seqs = conn.received.flatMap((m) => (m.type === 'watch.found' && m.payload.seq && !acked.has(m.payload.seq) ? [m.payload.seq] : []));
  for (const seq of seqs) acked.add(seq);
  if (seqs.length > 0) conn.send('ack', { seqs });
  return acked;
}

/** Every file of the `watch.found` messages received for a watcher, in order. */
function found(conn: AgentConnection, id: string): FoundFile[] {
  return conn.all('watch.found').filter((m) => m.payload.watcher_id === id).flatMap((m) => m.payload.files);
}

const polled = (conn: AgentConnection, id: string) => conn.all('watch.polled').filter((m) => m.payload.watcher_id === id);


/** Resolves once `n` more polls of `id` ended after this call. */
async function polls(conn: AgentConnection, id: string, n: number): Promise<void> {
  const from = polled(conn, id).length;
  await until(`${n} polls of ${id}`, () => polled(conn, id).length >= from + n);
}

/** A round trip: every message sent before it was handled by the agent. */
async function roundTrip(conn: AgentConnection, id: string): Promise<void> {
  conn.send('ping', { request_id: id });
  await conn.next('pong', (m) => m.payload.request_id === id);
}

test('a growing file is reported once, complete, after it stopped changing; each version once; found held until acked', async () => {
  const store = sftpStore();
  await store.put('before.csv', 'there at the start');
  const { conn, hello } = await startAgent();
  expect(hello.payload.watch).toBe(true);
  conn.send('watch.set', { watchers: [watcher(W1, store.settings, { pattern: '*.csv', stable_seconds: 2 })] });

  const first = await conn.next('watch.polled', (m) => m.payload.watcher_id === W1);
  expect(first.payload).toMatchObject({ revision: 1, listed: 1, matched: 1, reported: 0, waiting: 0 });
  expect(first.payload).not.toHaveProperty('error');
  expect(first.payload.state_bytes).toBeGreaterThan(0);

  await store.put('done.csv', 'complete');
  await store.put('skipped.tmp', 'not matched');
  await store.put('growing.csv', '');
  // Appended every 250 ms for 2.5 s: never 2 s unchanged.
  for (let i = 0; i < 10; i++) {
    store.append('growing.csv', Buffer.alloc(1000, i));
    await sleep(250);
  }
  const stoppedAt = Date.now();
  const acked = new Set<number>();
  await until('growing.csv found', () => {
    ackAll(conn, acked);
    return found(conn, W1).some((f) => f.path === 'growing.csv');
  });
  const foundAt = Date.now();
  await polls(conn, W1, 3);
  ackAll(conn, acked);

  const files = found(conn, W1);
  expect(files.map((f) => f.path).sort()).toEqual(['done.csv', 'growing.csv']);
  expect(files.find((f) => f.path === 'growing.csv')).toMatchObject({ name: 'growing.csv', size: 10_000, version: expect.stringMatching(/^size:10000:mtime:\d+$/) });
  expect(files.find((f) => f.path === 'done.csv')).toMatchObject({ size: 8, modified_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT/) });
  expect(foundAt).toBeGreaterThan(stoppedAt);
  // Numbered in order, each acknowledged once; the last polls report nothing new.
  const seqs = conn.all('watch.found').map((m) => m.payload.seq!);
  expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
  expect(new Set(seqs).size).toBe(seqs.length);
  expect(polled(conn, W1).slice(-2).map((m) => m.payload.reported)).toEqual([0, 0]);
  expect(conn.invalid).toEqual([]);
}, 40_000);

test('report_since on S3: the first listing reports only what was modified since, with its ETag', async () => {
  const store = await S3WatchStore.create();
  stores.push(store);
  await store.put('old.csv', 'before');
  const since = new Date((await store.connector.stat('old.csv'))!.modifiedAt!.getTime() + 1000);
  while (Date.now() < since.getTime() + 1100) await sleep(100);
  await store.put('new.csv', 'after');
  const { conn } = await startAgent();
  conn.send('watch.set', { watchers: [watcher(W1, store.settings, { include_existing: true }, { report_since: since.toISOString() })] });

  const report = await conn.next('watch.found', (m) => m.payload.watcher_id === W1);
  expect(report.payload).toMatchObject({ revision: 1, seq: 1 });
  expect(report.payload.files).toEqual([{ path: 'new.csv', name: 'new.csv', size: 5, modified_at: expect.any(String), version: expect.stringMatching(/^etag:/) }]);
  expect((await conn.next('watch.polled', (m) => m.payload.watcher_id === W1)).payload).toMatchObject({ listed: 2, matched: 2, reported: 1 });
  ackAll(conn);
  await polls(conn, W1, 2);
  expect(found(conn, W1)).toHaveLength(1);
  expect(conn.invalid).toEqual([]);
}, 30_000);

test('un-acknowledged reports are sent again after a reconnect; no poll runs while disconnected; the state survives', async () => {
  const store = sftpStore();
  await store.put('a.csv', 'a');
  await store.put('b.csv', 'b');
  const registry = countingRegistry();
  const { agent, conn } = await startAgent({ connectors: registry.source });
  const set = { watchers: [watcher(W1, store.settings, { include_existing: true })] };
  conn.send('watch.set', set);
  const report = await conn.next('watch.found', (m) => m.payload.watcher_id === W1);
  expect(report.payload.files.map((f) => f.path).sort()).toEqual(['a.csv', 'b.csv']);
  await conn.next('watch.polled', (m) => m.payload.watcher_id === W1);

  conn.ws.terminate();
  const second = await server.connection(1);
  await second.next('hello');
  // Held back from its welcome until the watcher's next poll fell due: it waits for the session
  // (WatchRunner's `due`, which only a welcome or a new set starts), nothing is polled meanwhile.
  const madeBefore = registry.made(store.settings.id);
  const runner = (agent as unknown as { watches: { due: Set<unknown> } }).watches;
  await until('the next poll due while disconnected', () => runner.due.size === 1);
  expect(registry.made(store.settings.id)).toBe(madeBefore);
  second.send('welcome', { agent_id: 'a'.repeat(24), heartbeat_ms: 30_000, lease_ms: 90_000, abort_jobs: [], acks: true });
  second.send('watch.set', set);

  // The same report, with its number, then polls that find nothing new (the watcher kept its state).
  const again = await second.next('watch.found');
  expect(again.payload).toEqual(report.payload);
  await polls(second, W1, 2);
  expect(found(second, W1)).toHaveLength(2);
  expect(polled(second, W1).every((m) => m.payload.reported === 0)).toBe(true);
  second.send('ack', { seqs: [report.payload.seq!] });
  await store.put('c.csv', 'c');
  const next = await second.next('watch.found');
  expect(next.payload).toMatchObject({ seq: report.payload.seq! + 1, files: [{ path: 'c.csv' }] });
  second.send('ack', { seqs: [next.payload.seq!] });
  await roundTrip(second, 'acked');
  second.ws.terminate();
  const third = await server.connection(2);
  await third.welcome({ acks: true });
  await roundTrip(third, 'after-acks');
  // Acknowledged reports are not sent again (held ones go out at the welcome, before the pong);
  // without a new set the watcher goes on polling, and a whole poll reports nothing again.
  await polls(third, W1, 1);
  expect(third.all('watch.found')).toEqual([]);
  expect([...conn.invalid, ...second.invalid, ...third.invalid]).toEqual([]);
}, 30_000);

test('a new revision starts over with a new baseline; the same revision keeps its state', async () => {
  const store = sftpStore();
  await store.put('present.csv', 'here');
  const { conn } = await startAgent();
  const w = watcher(W1, store.settings, { include_existing: false });
  conn.send('watch.set', { watchers: [w] });
  await polls(conn, W1, 1);
  // The same revision again, with include_existing changed: ignored, the state stays.
  conn.send('watch.set', { watchers: [{ ...w, spec: { ...w.spec, include_existing: true } }] });
  await polls(conn, W1, 2);
  expect(found(conn, W1)).toEqual([]);

  conn.send('watch.set', { watchers: [{ ...w, revision: 2, spec: { ...w.spec, include_existing: true } }] });
  const report = await conn.next('watch.found', (m) => m.payload.watcher_id === W1);
  expect(report.payload).toMatchObject({ revision: 2, files: [{ path: 'present.csv' }] });
  await conn.next('watch.polled', (m) => m.payload.revision === 2);
  expect(conn.invalid).toEqual([]);
}, 30_000);

test('a missing folder, a connection outside the allowed roots, an unusable pattern or report_since each give that watcher a watch.polled error; the others go on', async () => {
  const store = sftpStore();
  const local = tempDir('xfer-watch-local-');
  const allowed = tempDir('xfer-watch-allowed-');
  try {
    writeTree(local, { 'secret.txt': 'host file' });
    writeTree(allowed, { 'ok.csv': 'fine' });
    const { conn } = await startAgent({ access: allowingRoots(allowed) });
    const mounted = (dir: string, id: string): ConnectionSettings => ({ id, name: `mounted ${dir}`, type: 'nfs', host: null, port: 2049, path: '/', options: { mount_path: dir }, agent_id: null, credentials: {} });
    const W4 = '0000000000000000000000a4';
    const W5 = '0000000000000000000000a5';
    conn.send('watch.set', {
      watchers: [
        watcher(W1, store.settings, { path: 'missing/folder' }),
        watcher(W2, mounted(local, 'c'.repeat(24)), { include_existing: true }),
        watcher(W3, store.settings, { pattern: '[[:alpha:]]*' }),
        watcher(W4, mounted(allowed, 'd'.repeat(24)), { include_existing: true }),
        // The protocol's pattern for an instant lets a 13th month through; the agent names the field.
        watcher(W5, store.settings, {}, { report_since: '2026-13-45T00:00:00Z' }),
      ],
    });
    const missing = await conn.next('watch.polled', (m) => m.payload.watcher_id === W1);
    expect(missing.payload.error).toMatch(/missing\/folder.*does not exist|does not exist.*missing\/folder/);
    expect(missing.payload.error).not.toContain(store.settings.credentials.password!);
    const outside = await conn.next('watch.polled', (m) => m.payload.watcher_id === W2);
    expect(outside.payload.error).toContain(`the agent may not use the local directory ${local}: the agent exposes only ${allowed}`);
    const pattern = await conn.next('watch.polled', (m) => m.payload.watcher_id === W3);
    expect(pattern.payload).toMatchObject({ revision: 1, reported: 0, error: expect.stringMatching(/^pattern /) });
    expect((await conn.next('watch.polled', (m) => m.payload.watcher_id === W5)).payload.error).toBe('report_since must be a valid date and time');
    expect((await conn.next('watch.found', (m) => m.payload.watcher_id === W4)).payload.files).toMatchObject([{ path: 'ok.csv' }]);
    expect(found(conn, W2)).toEqual([]);
    // The refused watchers are retried every interval; the session was never dropped.
    await polls(conn, W2, 1);
    expect(polled(conn, W2).every((m) => m.payload.error !== undefined)).toBe(true);
    await roundTrip(conn, 'still-up');
    expect(server.connections).toHaveLength(1);
    expect(conn.invalid).toEqual([]);
  } finally {
    rmTemp(local);
    rmTemp(allowed);
  }
}, 30_000);

test('a host the agent\'s owner denied is refused for a watcher as for a job', async () => {
  const store = sftpStore();
  const access = new AgentAccess({ allowRoots: [], allowHosts: [], denyHosts: ['127.0.0.0/8', '::1', 'localhost'] });
  const { conn } = await startAgent({ access });
  conn.send('watch.set', { watchers: [watcher(W1, store.settings)] });
  const refused = await conn.next('watch.polled', (m) => m.payload.watcher_id === W1);
  expect(refused.payload.error).toMatch(/^the agent may not connect to /);
  expect(conn.invalid).toEqual([]);
}, 30_000);

test('a watcher removed from the set is no longer polled; the others are', async () => {
  const a = sftpStore();
  const b = sftpStore();
  const registry = countingRegistry();
  const { conn } = await startAgent({ connectors: registry.source });
  const wa = watcher(W1, a.settings);
  const wb = watcher(W2, { ...b.settings, id: 'b'.repeat(24) });
  conn.send('watch.set', { watchers: [wa, wb] });
  await Promise.all([polls(conn, W1, 2), polls(conn, W2, 2)]);
  conn.send('watch.set', { watchers: [wb] });
  await roundTrip(conn, 'set-applied');
  const madeA = registry.made(a.settings.id);
  const polledA = polled(conn, W1).length;
  await polls(conn, W2, 4);
  expect(registry.made(a.settings.id)).toBe(madeA);
  expect(polled(conn, W1)).toHaveLength(polledA);
  expect(conn.invalid).toEqual([]);
}, 30_000);

test('at most maxConcurrentPolls polls run at once; every watcher is polled', async () => {
  const store = sftpStore();
  await store.put('f.csv', 'x');
  // Each listing takes 200 ms longer, so that due polls pile up.
  const registry = countingRegistry((inner) => {
    const slow = new WrappedConnector(inner);
    const list = slow.list.bind(slow);
    slow.list = async function* (path: string, options: { recursive: boolean; signal?: AbortSignal }): AsyncIterable<Entry> {
      await sleep(200);
      yield* list(path, options);
    };
    return slow;
  });
  const { conn } = await startAgent({ connectors: registry.source, watch: { firstPollDelayMs: 0, pollIntervalMs: POLL_MS, maxConcurrentPolls: 2 } });
  const ids = Array.from({ length: 6 }, (_, i) => `0000000000000000000000b${i}`);
  conn.send('watch.set', { watchers: ids.map((id) => watcher(id, store.settings, { include_existing: true })) });
  await until('every watcher polled twice', () => ids.every((id) => polled(conn, id).length >= 2));
  expect(registry.maxOpen()).toBe(2);
  for (const id of ids) expect(found(conn, id).map((f) => f.path)).toEqual(['f.csv']);
  expect(conn.invalid).toEqual([]);
}, 30_000);

test(`more than ${MAX_FOUND_PER_REPORT} new files go out in several watch.found, each within the cap`, async () => {
  const store = sftpStore();
  const n = MAX_FOUND_PER_REPORT + 150;
  for (let i = 0; i < n; i++) await store.put(`f-${String(i).padStart(5, '0')}.csv`, String(i));
  const { conn } = await startAgent();
  conn.send('watch.set', { watchers: [watcher(W1, store.settings, { include_existing: true })] });
  const done = await conn.next('watch.polled', (m) => m.payload.watcher_id === W1);
  expect(done.payload).toMatchObject({ listed: n, matched: n, reported: n });
  expect(conn.all('watch.found').map((m) => m.payload.files.length)).toEqual([MAX_FOUND_PER_REPORT, 150]);
  expect(new Set(found(conn, W1).map((f) => f.path)).size).toBe(n);
  expect(conn.invalid).toEqual([]);
}, 60_000);

test('stopping the agent aborts a poll under way and closes its connector', async () => {
  const store = sftpStore();
  const listing = { started: false };
  const registry = countingRegistry((inner) => {
    const held = new WrappedConnector(inner);
    held.list = async function* (_path: string, options: { recursive: boolean; signal?: AbortSignal }): AsyncIterable<Entry> {
      listing.started = true;
      // A listing that never ends by itself (a hung server), only by its signal.
      await new Promise((_, reject) => options.signal!.addEventListener('abort', () => reject(options.signal!.reason as Error), { once: true }));
    };
    return held;
  });
  const { conn, stop } = await startAgent({ connectors: registry.source });
  conn.send('watch.set', { watchers: [watcher(W1, store.settings)] });
  await until('the listing started', () => listing.started);
  await stop();
  expect(registry.open()).toBe(0);
  expect(polled(conn, W1)).toEqual([]);
}, 30_000);
