import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import fc from 'fast-check';
import { CloseCodes, ServerToAgent, type ConnectionSettings } from '@xfer/shared';
import { describeFrame, fuzzFrame, isValidFrame, typeOf, type FuzzFrame } from '../../e2e/src/tools/frame-fuzz.js';
import { TEST_TOKEN } from './helpers/test-agent.js';
import { TestControlPlane, type AgentConnection } from './helpers/test-control-plane.js';

/**
 * Property test of the agent against a hostile control plane: a real `xfer-agent` process (the
 * built binary, so an unhandled throw or rejection would end it as it would in production) gets
 * generated frames after its welcome: JSON that is no frame, Object.prototype names as types,
 * mutated payloads of every message, binary, not UTF-8, a second welcome, job.assign with
 * nonsense and duplicates, cancels of unknown jobs, ping floods. The agent stays up, closes a bad
 * frame's session with protocolError (4400), reconnects, and still answers and copies.
 *
 * A fresh process per run: each 4400 doubles the agent's reconnect backoff (up to 30 s), which a
 * single process would spend most of the run waiting out.
 */
const BIN = fileURLToPath(new URL('../dist/bin/xfer-agent.js', import.meta.url));
const env = process.env;
const RUNS = 12;
const WAIT_MS = 15_000;
const root = join(env.XFER_TEST_SFTP_ROOT!, `agent-fuzz-${randomBytes(4).toString('hex')}`);

beforeAll(() => {
  mkdirSync(join(root, 'src'), { recursive: true });
  writeFileSync(join(root, 'src', 'one.txt'), 'one small file\n');
  spawnSync('chown', ['-R', `${env.XFER_TEST_SFTP_USER}:`, root]);
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

const sftp = (path: string, over: Partial<ConnectionSettings> = {}): ConnectionSettings => ({
  id: '000000000000000000000001', name: 'fuzz sftp', type: 'sftp', host: env.XFER_TEST_SFTP_HOST!, port: Number(env.XFER_TEST_SFTP_PORT),
  path, options: {}, agent_id: null, credentials: { username: env.XFER_TEST_SFTP_USER!, password: env.XFER_TEST_SFTP_PASSWORD! }, ...over,
});
/** Refused at once: nothing listens on port 1. */
const nowhere = sftp('/nowhere', { host: '127.0.0.1', port: 1 });
const options = { overwrite: 'always', verify: 'size', concurrency: 1 } as const;

/** Valid payloads of every message the control plane sends, aimed at nothing that works. */
function samples() {
  const jobIds = ['x', 'constructor', '__proto__', randomBytes(12).toString('hex')];
  const relayJob = randomBytes(12).toString('hex');
  const assign = (job_id: string) => ({ job_id, attempt: 1, source: nowhere, source_path: '/a', destination: nowhere, destination_path: '/b', options, resume: false });
  const all = {
    welcome: [{ agent_id: 'a'.repeat(24), heartbeat_ms: 30_000, lease_ms: 90_000, abort_jobs: ['x', 'constructor'] }],
    'job.assign': jobIds.map(assign),
    'job.cancel': jobIds.map((job_id) => ({ job_id })),
    'connection.test': [{ request_id: 'ct', connection: nowhere }, { request_id: 'constructor', connection: { ...nowhere, type: 's3' } }],
    ping: [{ request_id: 'p' }, { request_id: '__proto__' }],
    // Acknowledgements of reports the agent never sent (or already forgot) change nothing.
    ack: [{ seqs: [1] }, { seqs: [1, 2, 999_999] }],
    // Answers to queries the agent never sent are dropped.
    'job.verified': [{ request_id: 'vq-x', files: [] }, { request_id: 'constructor', files: [{ path: 'a', size: 1, attempt: 1, sha256: 'a'.repeat(64) }] }],
    // Relay messages on a session whose welcome did not offer relays: protocol errors (firstBadFrame).
    'relay.source': [{ job_id: relayJob, attempt: 1, source: nowhere, source_path: '/a', concurrency: 2 }],
    'relay.credit': [{ job_id: relayJob, attempt: 1, entries: 10, bytes: 1024 }],
    'relay.entries': [{ job_id: relayJob, attempt: 1, entries: [{ path: 'a', kind: 'file', size: 1 }], done: true }],
    'relay.want': [{ job_id: relayJob, attempt: 1, files: [{ path: 'a', size: 1 }] }],
    'relay.end': [{ job_id: relayJob, attempt: 1 }, { job_id: relayJob, attempt: 1, error: 'gone' }],
    // A watcher polled against nowhere answers watch.polled with an error; an empty set stops it.
    'watch.set': [{ watchers: [] }, {
      watchers: [{
        id: 'f'.repeat(24), revision: 1, connection: nowhere, poll_interval_seconds: 10, report_since: '2026-01-01T00:00:00.000Z',
        spec: { path: '', pattern: '*', recursive: false, stable_seconds: 0, include_existing: false },
      }],
    }],
    // A plan against nowhere answers plan.failed; a cancel of a plan not running and a page nobody asked for change nothing.
    'plan.assign': [{ plan_id: 'constructor', source: nowhere, source_path: '/a', destination: nowhere, destination_path: '/b', options: { ...options, mode: 'sync' } }],
    'plan.cancel': [{ plan_id: 'x' }, { plan_id: '__proto__' }],
    'job.plan.page': [{ request_id: 'pq-x', items: [], done: true }, { request_id: 'constructor', items: [{ path: 'a', action: 'delete', reason: 'x', destination: { size: 1 } }], done: false }],
    // Settling files on nowhere answers a whole-request error; hostile paths are refused per file.
    'source.settle': [
      { request_id: 'ss', connection: nowhere, action: 'delete', source_path: '/a', files: [{ path: 'a', size: 1 }] },
      { request_id: 'constructor', connection: nowhere, action: 'move', source_path: '/', to: '/done', files: [{ path: '../x', size: 0 }, { path: 'a//b', size: 2 }] },
    ],
  } satisfies Record<keyof typeof ServerToAgent, unknown[]>;
  return all;
}

interface AgentProc {
  child: ChildProcess;
  output: () => string;
  exited: Promise<number | string>;
}

function startAgent(server: TestControlPlane): AgentProc {
  const child = spawn(process.execPath, [BIN, 'start', '--url', server.baseUrl, '--drain-timeout-ms', '5000', '--max-jobs', '8', '--log-level', 'warn'], {
    env: { PATH: env.PATH ?? '', XFER_AGENT_TOKEN: TEST_TOKEN },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let out = '';
  child.stderr!.on('data', (d: Buffer) => { out = (out + d.toString()).slice(-50_000); });
  const exited = new Promise<number | string>((resolve) => child.once('exit', (code, signal) => resolve(code ?? signal ?? 'unknown')));
  return { child, output: () => out, exited };
}

function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout;
  return Promise.race([promise, new Promise<T>((_, reject) => { timer = setTimeout(() => reject(new Error(`${what} within ${ms} ms`)), ms); })]).finally(() => clearTimeout(timer));
}

/** Index of the first frame that must end the session: invalid, a second welcome, or a relay message (this session's welcome offers no relays). */
const firstBadFrame = (frames: FuzzFrame[]) => frames.findIndex((f) => !isValidFrame(ServerToAgent, f) || typeOf(f) === 'welcome' || String(typeOf(f)).startsWith('relay.'));

let runs = 0;
/** The agent works on this connection: it answers a ping, and copies a file end to end. */
async function expectWorking(conn: AgentConnection): Promise<void> {
  const id = `works-${++runs}`;
  conn.send('ping', { request_id: id });
  await within(conn.next('pong', (m) => m.payload.request_id === id), WAIT_MS, 'pong');
  const jobId = randomBytes(12).toString('hex');
  conn.send('job.assign', { job_id: jobId, attempt: 1, source: sftp(`${root}/src`), source_path: '/', destination: sftp(root), destination_path: `/dst-${runs}`, options, resume: false });
  const end = await within(Promise.race([conn.next('job.completed', (m) => m.payload.job_id === jobId), conn.next('job.failed', (m) => m.payload.job_id === jobId)]), WAIT_MS * 2, 'job end');
  expect([end.type, end.payload.files_transferred]).toEqual(['job.completed', 1]);
}

describe('generated frames from a hostile control plane at a real xfer-agent', () => {
  test('the agent stays up, closes a bad frame\'s session with 4400, reconnects and still works', async () => {
    await fc.assert(fc.asyncProperty(fc.array(fuzzFrame(samples()), { minLength: 1, maxLength: 6 }), fc.nat({ max: 200 }), async (frames, pings) => {
      const server = await TestControlPlane.start();
      const agent = startAgent(server);
      try {
        const first = await within(server.connection(0), WAIT_MS, 'first connection');
        await within(first.welcome(), WAIT_MS, 'hello');
        for (const frame of frames) first.ws.send(frame.data, { binary: frame.binary });
        // A ping flood on top: each is answered, none ends anything.
        for (let i = 0; i < pings; i++) first.send('ping', { request_id: `flood-${i}` });
        const bad = firstBadFrame(frames);
        let conn = first;
        if (bad >= 0) {
          const closed = await within(first.closed, WAIT_MS, `close after ${describeFrame(frames[bad]!)}`);
          expect(closed.code).toBe(CloseCodes.protocolError);
          conn = await within(server.connection(1), WAIT_MS, 'reconnect');
          await within(conn.welcome(), WAIT_MS, 'hello after reconnect');
        } else if (pings > 0) {
          await within(first.next('pong', (m) => m.payload.request_id === `flood-${pings - 1}`), WAIT_MS, 'the last flood pong');
        }
        await expectWorking(conn);
        expect(conn.invalid).toEqual([]);
        expect({ exit: agent.child.exitCode, signal: agent.child.signalCode }).toEqual({ exit: null, signal: null });
      } finally {
        agent.child.kill('SIGTERM');
        const code = await agent.exited;
        await server.close();
        // A clean stop (0), never a crash: no uncaught exception or unhandled rejection on the way.
        expect({ code, fatal: /uncaught|unhandled/i.test(agent.output()) ? agent.output() : '' }).toEqual({ code: 0, fatal: '' });
      }
    }), { numRuns: RUNS, endOnFailure: true });
  }, 600_000);
});
