import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { S3Client } from '@aws-sdk/client-s3';
import { BINARIES, startStack, type Stack } from '../src/stack.js';
import { cliEnv, jsonOf, lines, runCli, startCli, type CliRun } from './support/cli.js';
import { FIXTURES } from './support/connections.js';
import { digestBucket, s3Client, sha256, type Digests } from './support/trees.js';

/**
 * `xfer transfers …` as the built binary against a real control plane, a real agent, OpenSSH
 * sftp and versitygw s3: `run` moves real bytes and prints the final job, progress goes to
 * stderr (plain lines in a pipe, the ink view under a pseudo-terminal), a failed job exits 7
 * with the job on stdout and one error line, Ctrl-C cancels the job on the server, and the
 * state rules of the API come out as exit codes.
 */
const env = process.env;
const run = randomBytes(4).toString('hex');
const place = `e2e-cli-xfer-${run}`;
const sftpRoot = join(env.XFER_TEST_SFTP_ROOT!, place);
const SMALL = 6;
const SLOW = 400;

let stack: Stack;
let home: string;
let s3: S3Client;
const expected: Digests = new Map();
const ids = { sftp: '', s3: '' };
const names = { sftp: `cli sftp ${run}`, s3: `cli s3 ${run}` };

/** The CLI's environment: a HOME of its own, credentials from XFER_URL/XFER_API_KEY. */
const xferEnv = (extra: Record<string, string> = {}) => cliEnv(home, { XFER_URL: stack.url, XFER_API_KEY: stack.api.token, ...extra });
const xfer = (args: string[], o: { input?: string; env?: Record<string, string> } = {}): CliRun =>
  runCli(args, { env: xferEnv(o.env), input: o.input, timeoutMs: 120_000 });
const json = <T = any>(args: string[], input = ''): T => jsonOf<T>(xfer([...args, '--json'], { input }));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The CLI started in the background, for signals, and `waitFor` what it has printed so far to pass a test. */
function startXfer(args: string[], extra: Record<string, string> = {}) {
  const p = startCli(args, { env: xferEnv(extra), timeoutMs: 120_000 });
  const waitFor = async (test: (o: { stdout: string; stderr: string }) => boolean, timeoutMs = 60_000) => {
    const deadline = Date.now() + timeoutMs;
    while (!test(p.printed())) {
      if (p.child.exitCode !== null) throw new Error(`xfer exited ${p.child.exitCode} first:\n${p.printed().stderr}`);
      if (Date.now() > deadline) throw new Error(`not seen within ${timeoutMs} ms:\n${p.printed().stderr}`);
      await sleep(20);
    }
  };
  return Object.assign(p, { waitFor });
}

const runArgs = (sourcePath: string, destPath: string, more: string[] = []) =>
  ['transfers', 'run', '--source', names.sftp, '--source-path', sourcePath, '--dest', ids.s3, '--dest-path', destPath, ...more];

beforeAll(async () => {
  const sftp = FIXTURES.sftp!;
  const s3Fixture = FIXTURES.s3!;
  for (let i = 0; i < SMALL; i++) {
    const data = randomBytes(1000 + i * 7919);
    mkdirSync(join(sftpRoot, 'src', i % 2 ? 'sub' : ''), { recursive: true });
    const rel = `${i % 2 ? 'sub/' : ''}f${i}.bin`;
    writeFileSync(join(sftpRoot, 'src', rel), data);
    expected.set(rel, sha256(data));
  }
  // Many files copied one at a time: a job that runs long enough to be interrupted.
  mkdirSync(join(sftpRoot, 'slow'), { recursive: true });
  for (let i = 0; i < SLOW; i++) writeFileSync(join(sftpRoot, 'slow', `s${i}.bin`), randomBytes(64 * 1024));
  await sftp.prepare(place);
  await s3Fixture.prepare(place);
  s3 = s3Client(env);

  stack = await startStack({ env });
  await stack.startAgent(`cli-xfer-agent-${run}`);
  home = mkdtempSync(join(tmpdir(), 'xfer-cli-transfers-'));
  // Both connections through the CLI, their secrets on stdin.
  for (const [key, fixture] of [['sftp', sftp], ['s3', s3Fixture]] as const) {
    const { credentials, ...body } = fixture.body(place) as Record<string, unknown>;
    const args = ['connections', 'create', '--name', names[key], '--type', String(body.type), '--path', String(body.path), '--credentials-stdin'];
    if (body.host) args.push('--host', String(body.host));
    if (body.port) args.push('--port', String(body.port));
    if (body.options) args.push('--options', JSON.stringify(body.options));
    ids[key] = json<{ id: string }>(args, JSON.stringify(credentials)).id;
  }
}, 180_000);

afterAll(async () => {
  await stack?.stop();
  if (home) rmSync(home, { recursive: true, force: true });
  rmSync(sftpRoot, { recursive: true, force: true });
}, 60_000);

test('run --json: creates, starts and follows the job; exit 0, the completed Transfer, the bytes at the destination', async () => {
  const res = xfer([...runArgs('/src', '/copy', ['--name', `copy ${run}`, '--concurrency', '2']), '--json']);
  expect(res).toMatchObject({ status: 0 });
  const job = JSON.parse(res.stdout);
  expect(job).toMatchObject({
    name: `copy ${run}`, status: 'completed', error: null, files_total: SMALL, files_transferred: SMALL,
    sourceConnectionId: ids.sftp, destinationConnectionId: ids.s3, options: { concurrency: 2 },
  });
  expect(job).toEqual(await stack.api.data('GET', `/transfers/${job.id}`));
  // --json in a pipe: no progress, nothing on stderr.
  expect(res.stderr).toBe('');
  const copied = await digestBucket(s3, place, 'copy');
  expect(copied.files).toEqual(expected);

  // Its per-file results, and the job from list/get/watch.
  const files = json<{ path: string; status: string }[]>(['transfers', 'files', job.id, '--all']);
  expect(files.map((f) => f.path).sort()).toEqual([...expected.keys()].sort());
  expect(files.every((f) => f.status === 'copied')).toBe(true);
  expect(json(['transfers', 'files', job.id, '--status', 'failed'])).toEqual([]);
  expect(json<{ id: string }[]>(['transfers', 'list', '--status', 'completed', '--all']).map((t) => t.id)).toContain(job.id);
  expect(json(['transfers', 'get', job.id])).toEqual(job);

  const watched = xfer(['transfers', 'watch', job.id, '--json']);
  expect(watched.status).toBe(0);
  expect(JSON.parse(watched.stdout)).toEqual(job);

  const table = xfer(['transfers', 'list', '--status', 'completed']);
  expect(table.stdout).toMatch(/^ID +NAME +STATUS +FILES +BYTES +DELETED +ATTEMPT +CREATED$/m);
  expect(table.stdout).toMatch(new RegExp(`^${job.id} +copy ${run} +completed +${SMALL}/${SMALL} `, 'm'));
}, 120_000);

test('run without --json in a pipe: plain progress lines on stderr ending with the final state; the job on stdout', () => {
  const res = xfer(runArgs('/src', '/plain', ['--name', `plain ${run}`]), { env: { XFER_PROGRESS_INTERVAL_MS: '1' } });
  expect(res.status).toBe(0);
  const [waiting, ...progress] = lines(res.stderr);
  // Executed, the job first waits in the queue for an agent's free slot: said once.
  expect(waiting).toMatch(/^Transfer [0-9a-f]{24} waits for an agent with a free slot \(queue position \d+\)$/);
  expect(progress.length).toBeGreaterThanOrEqual(2);
  for (const line of progress) expect(line).toMatch(new RegExp(`^plain ${run} \\[(queued|in-progress|completed)\\]`));
  expect(progress.at(-1)).toMatch(new RegExp(`^plain ${run} \\[completed\\] 100%: ${SMALL}/${SMALL} files, `));
  expect(res.stdout).toMatch(/^status: +completed$/m);
  expect(res.stdout).toMatch(new RegExp(`^files_transferred: +${SMALL}$`, 'm'));
}, 120_000);

test('a job that fails: exit 7, the failed job on stdout (--json too), the job\'s error as the one stderr line', async () => {
  const res = xfer([...runArgs('/no-such-dir', '/never', ['--name', `fails ${run}`]), '--json']);
  expect(res.status).toBe(7);
  const job = JSON.parse(res.stdout);
  expect(job).toMatchObject({ status: 'failed', error: expect.any(String) });
  expect(await stack.api.data('GET', `/transfers/${job.id}`)).toMatchObject({ status: 'failed', error: job.error });
  expect(lines(res.stderr)).toHaveLength(1);
  expect(JSON.parse(res.stderr)).toEqual({ error: `Transfer ${job.id} failed: ${job.error}` });

  // Human output: the same line, with "Error: ", after the progress lines.
  const again = xfer(['transfers', 'retry', job.id, '--run'], { env: { XFER_PROGRESS_INTERVAL_MS: '1' } });
  expect(again.status).toBe(7);
  expect(lines(again.stderr).at(-1)).toBe(`Error: Transfer ${job.id} failed: ${job.error}`);
  expect(lines(again.stderr).filter((l) => l.startsWith('Error:'))).toHaveLength(1);
  expect(again.stdout).toMatch(/^attempt: +2$/m);
}, 120_000);

test('Ctrl-C during run cancels the job on the server, waits for it to say so, exits 7', async () => {
  const p = startXfer(runArgs('/slow', '/slow-copy', ['--name', `slow ${run}`, '--concurrency', '1']), { XFER_PROGRESS_INTERVAL_MS: '1' });
  await p.waitFor((o) => /\[in-progress\]/.test(o.stderr));
  p.child.kill('SIGINT');
  expect((await p).status).toBe(7);
  const id = /Cancelling transfer ([0-9a-f]{24})/.exec(p.printed().stderr)?.[1];
  expect(id).toBeDefined();
  const job = await stack.api.data('GET', `/transfers/${id}`);
  expect(job.status).toBe('cancelled');
  expect(job.files_transferred).toBeLessThan(SLOW);
  expect(lines(p.printed().stderr).at(-1)).toBe(`Error: Transfer ${id} cancelled`);
  expect(p.printed().stdout).toMatch(/^status: +cancelled$/m);
}, 120_000);

test('a second Ctrl-C stops waiting at once (exit 130), even with a request hanging', async () => {
  const p = startXfer(runArgs('/slow', '/slow-twice', ['--name', `twice ${run}`, '--concurrency', '1']), { XFER_PROGRESS_INTERVAL_MS: '1' });
  await p.waitFor((o) => /\[in-progress\]/.test(o.stderr));
  // A frozen server holds the cancel request: only the second Ctrl-C can end the wait.
  stack.server.child.kill('SIGSTOP');
  try {
    p.child.kill('SIGINT');
    await p.waitFor((o) => o.stderr.includes('Cancelling transfer'));
    p.child.kill('SIGINT');
    expect((await p).status).toBe(130);
  } finally {
    stack.server.child.kill('SIGCONT');
  }
  const last = lines(p.printed().stderr).at(-1)!;
  expect(last).toMatch(/^Error: Interrupted; transfer [0-9a-f]{24} was asked to cancel: see xfer transfers get [0-9a-f]{24}$/);
  const id = /transfer ([0-9a-f]{24})/.exec(last)![1];
  // The cancel may or may not have reached the server before the exit: leave no job running.
  await stack.api.call('POST', `/transfers/${id}/cancel`);
  expect(await stack.api.data('GET', `/transfers/${id}`)).toMatchObject({ status: 'cancelled' });
}, 120_000);

test('watch: Ctrl-C only stops watching (exit 130), the job carries on; execute --no-wait starts it, watch follows it to 0', async () => {
  const job = json(['transfers', 'create', '--source', ids.sftp, '--source-path', '/src', '--dest', names.s3, '--dest-path', '/watched']);
  expect(job).toMatchObject({ status: 'queued', name: `${ids.sftp}:/src -> ${names.s3}:/watched`, destinationConnectionId: ids.s3 });
  const p = startXfer(['transfers', 'watch', job.id]);
  await p.waitFor((o) => o.stderr.includes(`Transfer ${job.id} is queued`));
  p.child.kill('SIGINT');
  expect((await p).status).toBe(130);
  expect(lines(p.printed().stderr).at(-1)).toBe(`Error: Stopped watching; transfer ${job.id} continues on the server: xfer transfers watch ${job.id}`);
  expect(await stack.api.data('GET', `/transfers/${job.id}`)).toMatchObject({ status: 'queued' });

  const started = json(['transfers', 'execute', job.id, '--no-wait']);
  // Execute makes it wait for an agent; the scheduler starts it right after.
  expect(started).toMatchObject({ id: job.id, status: 'queued', queued_at: expect.any(String), queue_position: 1 });
  const watched = xfer(['transfers', 'watch', job.id, '--json']);
  expect(watched.status).toBe(0);
  expect(JSON.parse(watched.stdout)).toMatchObject({ id: job.id, status: 'completed', files_transferred: SMALL });
}, 120_000);

test('state rules as exit codes: unknown id 4, delete while queued 5, cancel then retry then delete', async () => {
  const unknown = '0123456789abcdef01234567';
  for (const args of [['transfers', 'get', unknown], ['transfers', 'watch', unknown], ['transfers', 'files', unknown], ['transfers', 'cancel', unknown]]) {
    const res = xfer(args);
    expect({ args, status: res.status }).toEqual({ args, status: 4 });
    expect(lines(res.stderr)).toHaveLength(1);
  }
  const noSuchConnection = xfer(['transfers', 'create', '--source', `nope ${run}`, '--source-path', '/', '--dest', ids.s3, '--dest-path', '/']);
  expect(noSuchConnection.status).toBe(4);
  expect(noSuchConnection.stderr).toBe(`Error: No connection with the id or name "nope ${run}"\n`);

  const job = json(['transfers', 'create', '--name', `rules ${run}`, '--source', ids.sftp, '--source-path', '/src', '--dest', ids.s3, '--dest-path', '/rules']);
  const refused = xfer(['transfers', 'delete', job.id]);
  expect(refused.status).toBe(5);
  expect(lines(refused.stderr)).toHaveLength(1);
  expect(refused.stderr).toMatch(/^Error: Transfer [0-9a-f]{24} is queued/);

  expect(json(['transfers', 'cancel', job.id])).toMatchObject({ id: job.id, status: 'cancelled' });
  expect(xfer(['transfers', 'cancel', job.id]).status).toBe(5);
  expect(xfer(['transfers', 'execute', job.id]).status).toBe(5);
  // watch of a finished job returns at once: 7, it was cancelled.
  expect(xfer(['transfers', 'watch', job.id]).status).toBe(7);
  expect(json(['transfers', 'retry', job.id])).toMatchObject({ id: job.id, status: 'queued', attempt: 2 });
  expect(json(['transfers', 'cancel', job.id])).toMatchObject({ status: 'cancelled' });
  expect(json(['transfers', 'delete', job.id])).toEqual({ id: job.id, deleted: true });
  expect((await stack.api.call('GET', `/transfers/${job.id}`)).status).toBe(404);

  const bad = xfer(['transfers', 'create', '--source', ids.sftp, '--source-path', 'relative', '--dest', ids.s3, '--dest-path', '/']);
  expect(bad.status).toBe(2);
  expect(xfer(['transfers', 'create', '--source', ids.sftp, '--source-path', '/', '--dest', ids.s3, '--dest-path', '/', '--concurrency', '0']).status).toBe(2);
}, 120_000);

test('on a terminal (script(1) pseudo-terminal) run draws the ink view: label, state, bar, percentage, files', () => {
  const cmd = [process.execPath, BINARIES.cli, ...runArgs('/src', '/tty', ['--name', `tty ${run}`])].map((a) => `'${a.replace(/'/g, `'\\''`)}'`).join(' ');
  const res = spawnSync('script', ['-qfec', `stty cols 200 rows 40; ${cmd}`, '/dev/null'], { env: xferEnv(), encoding: 'utf8', timeout: 120_000 });
  expect(res.status).toBe(0);
  const screen = res.stdout.replace(/\u001b\[[0-9;?]*[A-Za-z]/g, '');
  expect(screen).toContain(`tty ${run}`);
  expect(screen).toContain('completed');
  expect(screen).toContain('█'.repeat(24));
  expect(screen).toContain('100%');
  expect(screen).toContain(`${SMALL}/${SMALL} files`);
  expect(screen).toMatch(/^status: +completed\r?$/m);
}, 120_000);

// Last: it stops the control plane.
test('the server going away while following: exit 6 after the retries, naming the command that resumes', async () => {
  const job = json(['transfers', 'create', '--name', `orphan ${run}`, '--source', ids.sftp, '--source-path', '/src', '--dest', ids.s3, '--dest-path', '/orphan']);
  const p = startXfer(['transfers', 'watch', job.id]);
  await p.waitFor((o) => o.stderr.includes(`Transfer ${job.id} is queued`));
  stack.server.child.kill('SIGKILL');
  expect((await p).status).toBe(6);
  const last = lines(p.printed().stderr).at(-1)!;
  expect(last).toMatch(new RegExp(`^Error: Connection refused .+ \\(transfer ${job.id} continues on the server; follow it again with xfer transfers watch ${job.id}\\)$`));
  expect(lines(p.printed().stderr).filter((l) => l.startsWith('Error:'))).toHaveLength(1);
}, 120_000);
