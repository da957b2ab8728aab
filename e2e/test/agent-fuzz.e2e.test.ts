import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import WebSocket from 'ws';
import { AgentToServer, CloseCodes, MAX_FRAME_BYTES, PROTOCOL_VERSION } from '@xfer/shared';
import { startStack, type Stack } from '../src/stack.js';
import { describeFrame, fuzzFrame, isValidFrame, typeOf, validFrame, type FuzzFrame } from '../src/tools/frame-fuzz.js';

/**
 * Property tests at a real `xfer-server`'s agent endpoint: clients holding real agent tokens throw
 * generated frames at it (JSON that is no frame, `type` drawn from the message names and from
 * Object.prototype's, mutated payloads of every message type, binary, not UTF-8, out of session
 * order). Whatever arrives, the process stays up, `/health` answers, a bad frame closes only its
 * own socket with protocolError (4400), and a real `xfer-agent` connected all along keeps
 * answering and copying.
 */
const env = process.env;
const run = randomBytes(4).toString('hex');
const sftpRoot = join(env.XFER_TEST_SFTP_ROOT!, `e2e-fuzz-${run}`);
/** Bounded so the file runs in well under a minute on a busy machine. */
const RUNS = 40;
const WAIT_MS = 10_000;

let stack: Stack;
let good: { id: string };
let fuzzToken: string;
const ids = { source: '', destination: '' };

beforeAll(async () => {
  mkdirSync(join(sftpRoot, 'src'), { recursive: true });
  writeFileSync(join(sftpRoot, 'src', 'one.txt'), 'one small file\n');
  spawnSync('chown', ['-R', `${env.XFER_TEST_SFTP_USER}:`, sftpRoot]);
  stack = await startStack({ env, serverEnv: { XFER_DISPATCH_POLL_MS: '100', XFER_AGENT_HELLO_TIMEOUT_MS: '3000' } });
  good = await stack.startAgent('well-behaved');
  fuzzToken = (await stack.api.data<{ token: string }>('POST', '/agents', { name: 'fuzzer' })).token;
  const sftp = (path: string) => ({
    type: 'sftp', host: env.XFER_TEST_SFTP_HOST, port: Number(env.XFER_TEST_SFTP_PORT), path, agent_id: good.id,
    credentials: { username: env.XFER_TEST_SFTP_USER, password: env.XFER_TEST_SFTP_PASSWORD },
  });
  ids.source = (await stack.api.data('POST', '/connections', { name: 'fuzz src', ...sftp(join(sftpRoot, 'src')) })).id;
  ids.destination = (await stack.api.data('POST', '/connections', { name: 'fuzz dst', ...sftp(sftpRoot) })).id;
}, 120_000);

afterAll(async () => {
  await stack?.stop();
  rmSync(sftpRoot, { recursive: true, force: true });
}, 60_000);

const oid = () => randomBytes(12).toString('hex');
const counters = { files_total: 1, files_transferred: 1, files_skipped: 0, files_failed: 0, bytes_transferred: 10 };
const hello = { version: '0.1.0-fuzz', hostname: 'fuzz', connector_types: ['sftp'], running_jobs: [], max_jobs: 1 };

/** Valid payloads of every message an agent sends; job ids are nobody's, malformed, or prototype names. */
function samples() {
  const jobIds = [oid(), 'x', 'constructor', '__proto__', '0'.repeat(24)];
  const perJob = <T>(make: (job_id: string) => T) => jobIds.map(make);
  const all = {
    hello: [hello, { ...hello, running_jobs: [oid(), 'x', 'constructor'], connector_types: [] }],
    'job.accepted': perJob((job_id) => ({ job_id })),
    'job.progress': perJob((job_id) => ({
      job_id, ...counters, listing_done: false,
      files: [{ path: 'a/b.txt', status: 'copied', size: 10, sha256: 'a'.repeat(64), verified_by: 'sha256' }, { path: 'c', status: 'failed', size: 0, error: 'no' }],
    })),
    'job.completed': perJob((job_id) => ({ job_id, ...counters })),
    'job.failed': perJob((job_id) => ({ job_id, ...counters, error: 'broken' })),
    'job.cancelled': perJob((job_id) => ({ job_id, ...counters })),
    'connection.test.result': [{ request_id: oid(), success: true, message: 'ok', latency_ms: 1 }],
    'source.settle.result': [{ request_id: oid(), results: [{ path: 'a', outcome: 'moved' }] }, { request_id: 'constructor', results: [], error: 'gone' }],
    pong: [{ request_id: oid() }, { request_id: 'constructor' }],
    // About jobs this agent does not run: answered with no files.
    'job.verified.query': perJob((job_id) => ({ job_id, request_id: oid(), paths: ['a/b.txt', 'constructor', '__proto__'] })),
    'connection.credentials': [{ connection_id: ids.source || oid(), credentials: { refresh_token: 't' }, previous_sha256: {} }, { connection_id: oid(), credentials: { password: 'p' }, previous_sha256: { password: 'b'.repeat(64) } }],
    // Plans nobody asked this agent for, and page requests of jobs it does not run: dropped, nothing stored.
    'plan.items': [{ plan_id: oid(), seq: 1, items: [{ path: 'a/b.txt', action: 'copy', reason: 'new', source: { size: 1 } }] }, { plan_id: 'constructor', seq: 2, items: [{ path: '__proto__', action: 'delete', reason: 'x', destination: { size: 0 } }] }],
    'plan.done': [{ plan_id: oid(), batches: 1, summary: { copy: 1, update: 0, delete: 0, skip: 0, copy_bytes: 1, update_bytes: 0, delete_bytes: 0 }, fingerprint: 'a'.repeat(64) }],
    'plan.failed': [{ plan_id: oid(), error: 'broken' }, { plan_id: '__proto__', error: 'x' }],
    'job.plan.query': perJob((job_id) => ({ job_id, request_id: oid(), limit: 1000, after: 'constructor' })),
    // Reports of watchers that are nobody's: dropped (and acknowledged), nothing stored.
    'watch.found': [{ watcher_id: oid(), revision: 1, seq: 1, files: [{ path: 'in/a.csv', name: 'a.csv', size: 1, version: 'etag:"x"' }] }, { watcher_id: oid(), revision: 2, files: [{ path: 'constructor', name: 'constructor', size: 0, version: '__proto__' }] }],
    'watch.polled': [{ watcher_id: oid(), revision: 1, started_at: new Date().toISOString(), duration_ms: 1, listed: 0, matched: 0, reported: 0, waiting: 0, state_bytes: 0, error: 'gone' }],
    // Relay traffic: the fuzz hello offers no relays, so each of these closes the session (RELAY_TYPES).
    'relay.credit': [{ job_id: oid(), attempt: 1, entries: 10, bytes: 1024 }],
    'relay.entries': [{ job_id: oid(), attempt: 1, entries: [{ path: 'a', kind: 'file', size: 1 }], done: true }],
    'relay.want': [{ job_id: oid(), attempt: 1, files: [{ path: 'a', size: 1 }] }],
    'relay.end': [{ job_id: oid(), attempt: 1 }, { job_id: oid(), attempt: 2, error: 'gone' }],
    'relay.sent': [{ job_id: oid(), attempt: 1, files: [{ path: 'a', size: 1, sha256: 'a'.repeat(64) }] }],
  } satisfies Record<keyof typeof AgentToServer, unknown[]>;
  return all;
}

interface Socket {
  ws: WebSocket;
  closed: Promise<{ code: number; reason: string }>;
  welcomed: Promise<boolean>;
}

async function open(token: string): Promise<Socket> {
  const ws = new WebSocket(stack.url.replace(/^http/, 'ws') + '/agents/connect', { headers: { authorization: `Bearer ${token}` }, maxPayload: MAX_FRAME_BYTES * 2 });
  const closed = new Promise<{ code: number; reason: string }>((resolve) => ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() })));
  const welcomed = new Promise<boolean>((resolve) => {
    ws.on('message', (data) => { if ((JSON.parse(data.toString()) as { type: string }).type === 'welcome') resolve(true); });
    void closed.then(() => resolve(false));
  });
  ws.on('error', () => {});
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('close', () => reject(new Error('the upgrade was refused')));
  });
  return { ws, closed, welcomed };
}

const send = (ws: WebSocket, frame: FuzzFrame) => new Promise<void>((resolve) => ws.send(frame.data, { binary: frame.binary }, () => resolve()));

function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout;
  return Promise.race([promise, new Promise<T>((_, reject) => { timer = setTimeout(() => reject(new Error(`${what} within ${ms} ms`)), ms); })]).finally(() => clearTimeout(timer));
}

/** Says hello and waits for the welcome. */
async function sayHello(socket: Socket): Promise<void> {
  socket.ws.send(JSON.stringify({ v: PROTOCOL_VERSION, type: 'hello', id: 'h', payload: hello }));
  expect(await within(socket.welcomed, WAIT_MS, 'welcome')).toBe(true);
}

/** Relay messages are part of a session only when its hello offered relays; the fuzz hello does not. */
const RELAY_TYPES = /^relay\./;

/**
 * What the session order says of a sequence: the index of the first frame that must close the
 * socket (invalid, or valid but out of order: a message before hello, a second hello), or -1.
 */
function firstBadFrame(helloFirst: boolean, frames: FuzzFrame[]): number {
  let said = helloFirst;
  for (const [i, frame] of frames.entries()) {
    if (!isValidFrame(AgentToServer, frame) || RELAY_TYPES.test(typeOf(frame))) return i;
    const isHello = typeOf(frame) === 'hello';
    if (isHello === said) return i;
    said = true;
  }
  return -1;
}

/** Lines of the server's log saying something of its own failed: an error, or a coordination step (dispatch) failing. */
function serverFailures(): string[] {
  return stack.server.output().split('\n').filter((line) => /"level":(50|60)/.test(line) || line.includes('coordination step failed'));
}

/**
 * The control plane is up and serves everyone else: the process lives, nothing of its own failed
 * (no error in its log, no coordination step failing: a hostile agent must not be able to stop
 * dispatching for the others), /health answers, the good agent answers.
 */
async function expectServing(): Promise<void> {
  expect({ exitCode: stack.server.child.exitCode, signal: stack.server.child.signalCode }).toEqual({ exitCode: null, signal: null });
  expect(serverFailures()).toEqual([]);
  const health = await fetch(`${stack.url}/health`);
  expect(health.status).toBe(200);
  const test = await stack.api.data<{ success: boolean; message: string }>('POST', `/agents/${good.id}/test`, undefined, 200);
  expect(test.success).toBe(true);
}

let copies = 0;
/**
 * The good agent runs a one-file transfer to completion. Followed by polling rather than a
 * blocking execute, so a failure of the server's own (see serverFailures) ends the wait at once.
 */
async function expectTransferWorks(): Promise<void> {
  const job = await stack.api.data<{ id: string }>('POST', '/transfers', {
    name: `fuzz copy ${++copies}`, sourceConnectionId: ids.source, sourcePath: '/', destinationConnectionId: ids.destination, destinationPath: `/dst-${copies}`,
  });
  expect((await stack.api.call('POST', `/transfers/${job.id}/execute?wait=false`)).status).toBe(202);
  for (;;) {
    expect(serverFailures()).toEqual([]);
    const now = await stack.api.data<{ status: string; files_transferred: number; error: string | null }>('GET', `/transfers/${job.id}`);
    if (now.status !== 'queued' && now.status !== 'in-progress') {
      expect([now.status, now.files_transferred, now.error]).toEqual(['completed', 1, null]);
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe('generated frames at the agent endpoint of a real xfer-server', () => {
  test('the server stays up, a bad frame closes only its socket with 4400, and the other agent keeps working', async () => {
    await fc.assert(fc.asyncProperty(fc.boolean(), fc.array(fuzzFrame(samples()), { minLength: 1, maxLength: 6 }), async (helloFirst, frames) => {
      const socket = await open(fuzzToken);
      try {
        if (helloFirst) await sayHello(socket);
        for (const frame of frames) {
          if (socket.ws.readyState !== WebSocket.OPEN) break;
          await send(socket.ws, frame);
        }
        const bad = firstBadFrame(helloFirst, frames);
        if (bad >= 0) {
          const { code } = await within(socket.closed, WAIT_MS, `close after ${describeFrame(frames[bad]!)}`);
          expect([CloseCodes.protocolError, CloseCodes.unsupportedVersion]).toContain(code);
        }
        await expectServing();
      } finally {
        socket.ws.terminate();
        await socket.closed;
      }
    }), { numRuns: RUNS, endOnFailure: true });
  }, 600_000);

  test('valid frames on jobs that are not the agent\'s change nothing: its session stays, the other agent still gets and runs jobs', async () => {
    const s = samples();
    const reports = Object.keys(s).filter((type) => type !== 'hello' && !RELAY_TYPES.test(type));
    await fc.assert(fc.asyncProperty(fc.array(validFrame(s, reports), { minLength: 1, maxLength: 8 }), async (frames) => {
      const socket = await open(fuzzToken);
      try {
        await sayHello(socket);
        for (const frame of frames) await send(socket.ws, frame);
        await expectTransferWorks();
        expect(socket.ws.readyState).toBe(WebSocket.OPEN);
        await expectServing();
      } finally {
        socket.ws.terminate();
        await socket.closed;
      }
    }), { numRuns: 5, endOnFailure: true });
  }, 300_000);

  test('the Object.prototype names as message types, each on a socket of its own', async () => {
    for (const type of ['constructor', '__proto__', 'toString', 'hasOwnProperty', 'valueOf']) {
      for (const helloFirst of [false, true]) {
        const socket = await open(fuzzToken);
        if (helloFirst) await sayHello(socket);
        socket.ws.send(JSON.stringify({ v: 1, type, id: 'x', payload: {} }));
        expect(await within(socket.closed, WAIT_MS, `close after type ${type}`)).toEqual({ code: CloseCodes.protocolError, reason: `unknown message type "${type}"` });
        await expectServing();
      }
    }
    await expectTransferWorks();
  }, 120_000);

  test('a frame over MAX_FRAME_BYTES closes its socket (1009, never buffered whole); the server stays up', async () => {
    const socket = await open(fuzzToken);
    socket.ws.send(JSON.stringify({ v: 1, type: 'pong', id: 'big', payload: { request_id: 'x'.repeat(MAX_FRAME_BYTES) } }));
    expect((await within(socket.closed, WAIT_MS, 'close')).code).toBe(1009);
    await expectServing();
  }, 60_000);
});
