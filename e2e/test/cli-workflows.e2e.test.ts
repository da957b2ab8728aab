import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CreateBucketCommand, type S3Client } from '@aws-sdk/client-s3';
import { BINARIES, startStack, type Stack } from '../src/stack.js';
import { cliEnv, jsonFailure, jsonOf, lines, startCli, type CliFailure, type CliRun } from './support/cli.js';
import { sftpAndS3, waitFor } from './support/stack-helpers.js';
import { digestBucket, s3Client, sha256, type Digests } from './support/trees.js';

/**
 * `xfer workflows …` and `xfer workflow-runs …` run as the built binary against a real control
 * plane and a real agent, sftp (OpenSSH) → s3 (versitygw): --steps read inline, from a file and
 * from stdin, refused before any call when it is not a JSON array (exit 2 naming --steps), the
 * server's 400s naming steps[i].field (exit 2), create/get/list/update/delete; `run --follow` of
 * a one-step transfer workflow telling each step's state and exiting 0 with the run on stdout; a
 * run whose transfer fails (exit 7, the rest skipped); Ctrl-C that stops following only; cancel;
 * a schedule that runs a workflow (schedules --workflow); the live view on a terminal; the server lost while following (exit 6).
 * How runs behave on the server (settle steps, triggers, several instances) is the control
 * plane's tests'.
 */
const env = process.env;
const run = randomBytes(3).toString('hex');
const bucket = `e2e-cli-workflows-${run}`;
const sftpRoot = join(env.XFER_TEST_SFTP_ROOT!, `e2e-cli-workflows-${run}`);
const SMALL = 3;
/** Many small files copied one at a time: a run that lasts long enough (tens of seconds) to interrupt and cancel. */
const SLOW = 3000;

let stack: Stack;
let home: string;
let s3: S3Client;
const expected: Digests = new Map();
const names = { sftp: `cli-wf-${run} sftp`, s3: `cli-wf-${run} s3` };
const ids = { sftp: '', s3: '' };

const xfer = (args: string[], input?: string): Promise<CliRun> =>
  startCli(args, { env: cliEnv(home, { XFER_URL: stack.url, XFER_API_KEY: stack.api.token }), input, timeoutMs: 180_000 });
const json = async <T = any>(args: string[], input?: string): Promise<T> => jsonOf<T>(await xfer([...args, '--json'], input));
/** A failure with --json: the exit code and the error (support/cli.ts `jsonFailure`). */
const fails = async (args: string[], input?: string): Promise<CliFailure> => jsonFailure(await xfer([...args, '--json'], input));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The CLI in the background (plain progress lines every 200 ms), and `until` what it printed on stderr passes a test. */
function background(args: string[]) {
  const p = startCli(args, { env: cliEnv(home, { XFER_URL: stack.url, XFER_API_KEY: stack.api.token, XFER_PROGRESS_INTERVAL_MS: '200' }), timeoutMs: 180_000 });
  const until = async (test: (stderr: string) => boolean, timeoutMs = 60_000) => {
    const deadline = Date.now() + timeoutMs;
    while (!test(p.printed().stderr)) {
      if (p.child.exitCode !== null) throw new Error(`xfer exited ${p.child.exitCode} first:\n${p.printed().stderr}`);
      if (Date.now() > deadline) throw new Error(`not seen within ${timeoutMs} ms:\n${p.printed().stderr}`);
      await sleep(20);
    }
  };
  return Object.assign(p, { until });
}

/** A transfer step sftp → s3, connections by name (the CLI looks them up). */
const transferStep = (sourcePath: string, destinationPath: string, extra: Record<string, unknown> = {}) => ({
  type: 'transfer', sourceConnectionId: names.sftp, sourcePath, destinationConnectionId: names.s3, destinationPath, ...extra,
});

beforeAll(async () => {
  s3 = s3Client(env);
  await s3.send(new CreateBucketCommand({ Bucket: bucket }));
  mkdirSync(join(sftpRoot, 'src'), { recursive: true });
  for (let i = 0; i < SMALL; i++) {
    const data = randomBytes(1000 + i * 3001);
    writeFileSync(join(sftpRoot, 'src', `f${i}.bin`), data);
    expected.set(`f${i}.bin`, sha256(data));
  }
  mkdirSync(join(sftpRoot, 'slow'), { recursive: true });
  for (let i = 0; i < SLOW; i++) writeFileSync(join(sftpRoot, 'slow', `s${i}.bin`), randomBytes(4096));
  spawnSync('chown', ['-R', `${env.XFER_TEST_SFTP_USER}:`, sftpRoot]);
  stack = await startStack({ env, serverEnv: { XFER_DISPATCH_POLL_MS: '200' } });
  home = mkdtempSync(join(tmpdir(), 'xfer-cli-workflows-'));
  Object.assign(ids, await sftpAndS3(stack, `cli-wf-${run}`, sftpRoot, bucket));
  await stack.startAgent(`cli-wf-agent-${run}`);
}, 180_000);

afterAll(async () => {
  if (home) rmSync(home, { recursive: true, force: true });
  await stack?.stop();
  rmSync(sftpRoot, { recursive: true, force: true });
}, 60_000);

test('bad --steps: exit 2 naming the flag before any call (not JSON, not an array, not objects, no such file, stdin); the server\'s 400 naming steps[i].field; an unknown connection name 4', async () => {
  const name = `refused ${run}`;
  const create = ['workflows', 'create', '--name', name, '--steps'];
  expect(await fails([...create, '[{"type":"transfer"'])).toEqual({ status: 2, error: expect.stringMatching(/^--steps is not a JSON array of steps: /) });
  expect(await fails([...create, '{"type":"delete_source"}'])).toEqual({ status: 2, error: '--steps is not a JSON array of steps: expected an array of steps' });
  expect(await fails([...create, '[{"type":"delete_source"}, 3]'])).toEqual({ status: 2, error: '--steps is not a JSON array of steps: step 2 is not an object' });
  expect(await fails([...create, `@${join(home, 'no-such-steps.json')}`])).toEqual({ status: 2, error: `--steps @${join(home, 'no-such-steps.json')}: no such file` });
  expect((await fails([...create, '-'], 'not json\n')).error).toMatch(/^--steps is not a JSON array of steps: /);
  expect((await fails(['workflows', 'create', '--name', name])).status).toBe(2);
  // Refused before the server is asked: with no server at all it is still exit 2, not 6.
  const offline = await startCli([...create, '[', '--json'], { env: cliEnv(home, { XFER_URL: 'http://127.0.0.1:9/api/v1', XFER_API_KEY: stack.api.token }) });
  expect(jsonFailure(offline)).toEqual({ status: 2, error: expect.stringMatching(/^--steps is not a JSON array/) });

  // The shape is the CLI's to check, the fields the server's: its message, as the API answers it.
  const server = async (steps: unknown[]) => {
    const res = await stack.api.call('POST', '/workflows', { name, steps });
    expect(res.status).toBe(400);
    return (res.body as { error: string }).error;
  };
  const missing = await fails([...create, JSON.stringify([{ type: 'transfer', sourceConnectionId: ids.sftp, sourcePath: '/src', destinationConnectionId: ids.s3 }])]);
  expect(missing).toEqual({ status: 2, error: await server([{ type: 'transfer', sourceConnectionId: ids.sftp, sourcePath: '/src', destinationConnectionId: ids.s3 }]) });
  expect(missing.error).toMatch(/^steps\[0\]\.destinationPath /);
  const stranger = await fails([...create, JSON.stringify([transferStep('/src', '/x'), { type: 'delete_source', to: '/done' }])]);
  expect(stranger).toEqual({ status: 2, error: await server([transferStep('/src', '/x', { sourceConnectionId: ids.sftp, destinationConnectionId: ids.s3 }), { type: 'delete_source', to: '/done' }]) });
  expect(stranger.error).toMatch(/^steps\[1\]\.to /);
  expect(await fails([...create, JSON.stringify([{ ...transferStep('/src', '/x'), destinationConnectionId: `nowhere-${run}` }])]))
    .toEqual({ status: 4, error: `No connection with the id or name "nowhere-${run}"` });
  expect(await fails(['workflows', 'create', '--name', name, '--on-failure', 'retry', '--steps', '[]'])).toMatchObject({ status: 2 });

  const made = await stack.api.data<Array<{ name: string }>>('GET', '/workflows?limit=1000');
  expect(made.map((w) => w.name)).not.toContain(name);
}, 90_000);

test('create (inline, @file, stdin), get and list as JSON and for people, update of one field, --steps replacing the steps, delete', async () => {
  const name = `manage ${run}`;
  const steps = [transferStep('/src', '/copy/{{run.id}}', { options: { verify: 'size' } }), { type: 'move_source', to: '/done/{{date:YYYY-MM-DD}}' }];
  const created = await json(['workflows', 'create', '--name', name, '--steps', JSON.stringify(steps), '--on-failure', 'continue']);
  expect(created).toMatchObject({
    name, on_failure: 'continue',
    steps: [
      { type: 'transfer', sourceConnectionId: ids.sftp, sourcePath: '/src', destinationConnectionId: ids.s3, destinationPath: '/copy/{{run.id}}', options: expect.objectContaining({ verify: 'size' }) },
      { type: 'move_source', to: '/done/{{date:YYYY-MM-DD}}' },
    ],
  });
  expect(await json(['workflows', 'get', created.id])).toEqual(created);
  // By name too, while the name is the only one of its kind.
  expect(await json(['workflows', 'get', name])).toEqual(created);
  expect(await fails(['workflows', 'get', `nothing ${run}`])).toEqual({ status: 4, error: `No workflow with the id or name "nothing ${run}"` });
  expect(await stack.api.data('GET', `/workflows/${created.id}`)).toEqual(created);
  expect((await json<Array<{ id: string }>>(['workflows', 'list', '--all', '--limit', '1'])).map((w) => w.id)).toContain(created.id);

  const human = await xfer(['workflows', 'get', created.id]);
  expect(human.status).toBe(0);
  expect(human.stdout).toMatch(new RegExp(`^name: +${name}$`, 'm'));
  expect(human.stdout).toMatch(/^on_failure: +continue$/m);
  expect(human.stdout).toMatch(/^# +TYPE +WHAT$/m);
  expect(human.stdout).toMatch(new RegExp(`^1 +transfer +${ids.sftp}:/src -> ${ids.s3}:/copy/\\{\\{run\\.id\\}\\}`, 'm'));
  expect(human.stdout).toMatch(/^2 +move_source +to \/done\/\{\{date:YYYY-MM-DD\}\}$/m);
  const table = await xfer(['workflows', 'list', '--limit', '1000']);
  expect(table.stdout).toMatch(/^ID +NAME +STEPS +ON_FAILURE +UPDATED_AT$/m);
  expect(table.stdout).toMatch(new RegExp(`^${created.id} +${name} +transfer,move_source +continue +\\S+$`, 'm'));

  // One field changes, the rest stays.
  const renamed = await json(['workflows', 'update', created.id, '--name', `${name} 2`]);
  expect(renamed).toEqual({ ...created, name: `${name} 2`, updated_at: renamed.updated_at });
  // --steps replaces them all: from a file, then from stdin.
  const file = join(home, 'steps.json');
  writeFileSync(file, JSON.stringify([transferStep('/src', '/other')]));
  const fromFile = await json(['workflows', 'update', created.id, '--steps', `@${file}`, '--on-failure', 'stop']);
  expect(fromFile).toMatchObject({ name: `${name} 2`, on_failure: 'stop', steps: [{ type: 'transfer', destinationPath: '/other' }] });
  expect(fromFile.steps).toHaveLength(1);
  const fromStdin = await json(['workflows', 'update', created.id, '--steps', '-'], JSON.stringify([transferStep('/src', '/third'), { type: 'delete_source' }]) + '\n');
  expect(fromStdin.steps.map((s: { type: string }) => s.type)).toEqual(['transfer', 'delete_source']);
  const copy = await json(['workflows', 'create', '--name', `${name} copy`, '--steps', '-'], JSON.stringify(fromStdin.steps));
  expect(copy.steps).toEqual(fromStdin.steps);
  // Names need not be unique: a name two workflows share is refused, naming both ids.
  const twin = await json(['workflows', 'create', '--name', `${name} copy`, '--steps', JSON.stringify([transferStep('/src', '/twin')])]);
  expect(await fails(['workflows', 'update', `${name} copy`, '--on-failure', 'continue']))
    .toEqual({ status: 2, error: `2 workflows are named "${name} copy" (${twin.id}, ${copy.id}): give the id of the one you mean` });
  expect(await json(['workflows', 'delete', `${name} 2`])).toEqual({ id: created.id, deleted: true });
  await json(['workflows', 'delete', twin.id]);
  expect((await json(['workflows', 'get', `${name} copy`])).id).toBe(copy.id);

  expect(await fails(['workflows', 'update', created.id])).toEqual({ status: 2, error: 'Nothing to update: give at least one flag' });
  expect(await fails(['workflows', 'update', '0123456789abcdef01234567', '--name', 'x'])).toEqual({ status: 4, error: 'Workflow 0123456789abcdef01234567 not found' });

  const deleted = await xfer(['workflows', 'delete', copy.id]);
  expect({ status: deleted.status, stdout: deleted.stdout }).toEqual({ status: 0, stdout: `Deleted workflow ${copy.id}\n` });
  expect(await fails(['workflows', 'get', created.id])).toEqual({ status: 4, error: `Workflow ${created.id} not found` });
  expect((await fails(['workflows', 'runs', created.id])).status).toBe(4);
  expect((await fails(['workflows', 'delete', created.id])).status).toBe(4);
  expect((await fails(['workflows', 'delete', copy.id])).status).toBe(4);
}, 90_000);

test('run --follow of a one-step transfer: each step\'s state on stderr, the completed run on stdout, exit 0; --json prints the run; runs lists them', async () => {
  // A path may name only parameters of the account; a run's --param stands in for it.
  await stack.api.data('POST', '/parameters', { name: 'tag', value: 'account-value' });
  const workflow = await json(['workflows', 'create', '--name', `copy ${run}`, '--steps', JSON.stringify([transferStep('/src', '/wf-{{params.tag}}/{{run.id}}')])]);

  const res = await xfer(['workflows', 'run', `copy ${run}`, '--param', 'tag=first', '--follow']);
  expect(res.status).toBe(0);
  const runId = /^id: +(\S+)$/m.exec(res.stdout)?.[1];
  expect(runId).toMatch(/^[0-9a-f]{24}$/);
  const done = await stack.api.data<any>('GET', `/workflow-runs/${runId}`);
  expect(done).toMatchObject({ status: 'completed', workflow_id: workflow.id, params: ['tag'], trigger: { type: 'manual', id: null }, steps: [{ type: 'transfer', status: 'completed' }] });
  const transferId = done.steps[0].transfer_id as string;
  const transfer = await stack.api.data<any>('GET', `/transfers/${transferId}`);
  expect(transfer).toMatchObject({ status: 'completed', files_transferred: SMALL, destinationPath: `/wf-first/${runId}` });
  expect((await digestBucket(s3, bucket, `wf-first/${runId}`)).files).toEqual(expected);

  // stderr: the run's and the step's states as they changed, the step's end with its transfer's figures.
  const told = lines(res.stderr);
  expect(told).toContain(`Step 1/1 transfer: running (transfer ${transferId})`);
  // 1000 + 4001 + 7002 bytes.
  expect(transfer.bytes_transferred).toBe(12_003);
  expect(told).toContain(`Step 1/1 transfer: completed (${SMALL}/${SMALL} files, 12.0 kB)`);
  expect(told.at(-1)).toBe(`Workflow run ${runId}: completed`);
  expect(told.indexOf(`Step 1/1 transfer: running (transfer ${transferId})`)).toBeLessThan(told.indexOf(`Workflow run ${runId}: completed`));
  // stdout: the run, then its steps.
  expect(res.stdout).toMatch(/^status: +completed$/m);
  expect(res.stdout).toMatch(/^params: +tag$/m);
  expect(res.stdout).toMatch(/^# +TYPE +STATUS +RESULT +STARTED_AT +COMPLETED_AT +ERROR$/m);
  expect(res.stdout).toMatch(new RegExp(`^1 +transfer +completed +transfer ${transferId} +\\S+ +\\S+ +-$`, 'm'));

  // --json --follow: the final run, nothing on stderr in a pipe.
  const quiet = await xfer(['workflows', 'run', workflow.id, '--param', 'tag=second', '--follow', '--json']);
  expect({ status: quiet.status, stderr: quiet.stderr }).toEqual({ status: 0, stderr: '' });
  const second = JSON.parse(quiet.stdout);
  expect(second).toMatchObject({ status: 'completed', steps: [{ status: 'completed' }] });
  expect(second).toEqual(await stack.api.data('GET', `/workflow-runs/${second.id}`));
  expect(await json(['workflow-runs', 'get', second.id])).toEqual(second);
  // Following an ended run returns at once.
  expect(await json(['workflow-runs', 'watch', second.id])).toEqual(second);

  // Without --follow: the run as it started, and how to follow it (not with --json).
  const started = await xfer(['workflows', 'run', workflow.id, '--param', 'tag=third']);
  expect(started.status).toBe(0);
  const thirdId = /^id: +(\S+)$/m.exec(started.stdout)![1]!;
  expect(lines(started.stderr)).toEqual([`Workflow run ${thirdId} is on its way: follow it with xfer workflow-runs watch ${thirdId}`]);
  const watched = await xfer(['workflow-runs', 'watch', thirdId, '--quiet']);
  expect({ status: watched.status, stderr: watched.stderr }).toEqual({ status: 0, stderr: '' });
  expect(watched.stdout).toMatch(/^status: +completed$/m);

  const runs = await json<Array<{ id: string }>>(['workflows', 'runs', workflow.id, '--all', '--limit', '1']);
  expect(runs.map((r) => r.id)).toEqual([thirdId, second.id, runId]);
  expect(await json(['workflows', 'runs', workflow.id, '--status', 'failed'])).toEqual([]);
  expect((await json<Array<{ id: string }>>(['workflows', 'runs', workflow.id, '--status', 'completed'])).map((r) => r.id)).toEqual([thirdId, second.id, runId]);
  const table = await xfer(['workflows', 'runs', workflow.id]);
  expect(table.stdout).toMatch(/^ID +STATUS +TRIGGER +STEPS +CREATED_AT +COMPLETED_AT +ERROR$/m);
  expect(table.stdout).toMatch(new RegExp(`^${runId} +completed +manual +1/1 +\\S+ +\\S+ +-$`, 'm'));

  // A parameter no step uses is the server's 400 (exit 2); a malformed one the CLI's.
  const unused = await fails(['workflows', 'run', workflow.id, '--param', 'other=x']);
  expect(unused).toEqual({ status: 2, error: (await stack.api.call<{ error: string }>('POST', `/workflows/${workflow.id}/run`, { params: { other: 'x' } })).body.error });
  expect(unused.error).toMatch(/^params\.other/);
  expect(await fails(['workflows', 'run', workflow.id, '--param', 'tag'])).toEqual({ status: 2, error: 'Expected --param NAME=VALUE, got "tag"' });
  expect((await fails(['workflows', 'run', '0123456789abcdef01234567'])).status).toBe(4);
  expect(await fails(['workflow-runs', 'get', '0123456789abcdef01234567'])).toEqual({ status: 4, error: 'Workflow run 0123456789abcdef01234567 not found' });
}, 150_000);

test('a run whose transfer fails: exit 7, the failed run on stdout (--json too), its error as the one stderr line, the next step skipped', async () => {
  const workflow = await json(['workflows', 'create', '--name', `fails ${run}`, '--steps', JSON.stringify([transferStep('/no-such-dir', '/never'), { type: 'delete_source' }])]);

  const res = await xfer(['workflows', 'run', workflow.id, '--follow', '--json']);
  expect(res.status).toBe(7);
  const failed = JSON.parse(res.stdout);
  expect(failed).toMatchObject({ status: 'failed', error: expect.any(String), steps: [{ type: 'transfer', status: 'failed' }, { type: 'delete_source', status: 'skipped' }] });
  expect(failed).toEqual(await stack.api.data('GET', `/workflow-runs/${failed.id}`));
  expect(JSON.parse(res.stderr)).toEqual({ error: `Workflow run ${failed.id} failed: ${failed.error}` });

  const human = await xfer(['workflows', 'run', workflow.id, '--follow']);
  expect(human.status).toBe(7);
  const told = lines(human.stderr);
  expect(told).toContainEqual(expect.stringMatching(/^Step 1\/2 transfer: failed \(0\/0 files, 0 B\): .*its transfer \S+ failed: source path \/no-such-dir does not exist$/));
  expect(told).toContain('Step 2/2 delete_source: skipped');
  expect(told.at(-1)).toMatch(/^Error: Workflow run \S+ failed: .*its transfer \S+ failed: source path \/no-such-dir does not exist$/);
  expect(human.stdout).toMatch(/^status: +failed$/m);
  expect(human.stdout).toMatch(/^2 +delete_source +skipped +- +- +- +-$/m);

  expect((await json<Array<{ id: string }>>(['workflows', 'runs', workflow.id, '--status', 'failed'])).map((r) => r.id)).toContain(failed.id);
  // Watching a failed run: at once, 7.
  expect((await xfer(['workflow-runs', 'watch', failed.id])).status).toBe(7);
  expect(await fails(['workflow-runs', 'cancel', failed.id])).toMatchObject({ status: 5 });
}, 120_000);

test('Ctrl-C while following stops following only (exit 130, the run goes on); watch picks it up; cancel ends it and the watcher exits 7', async () => {
  const workflow = await json(['workflows', 'create', '--name', `slow ${run}`, '--steps', JSON.stringify([transferStep('/slow', '/slow/{{run.id}}', { options: { concurrency: 1 } })])]);

  const following = background(['workflows', 'run', workflow.id, '--follow']);
  await following.until((e) => /^Step 1\/1 transfer: running \(transfer \S+\)$/m.test(e));
  // The live progress of the running transfer (plain lines in a pipe).
  await following.until((e) => /^Step 1\/1 transfer \[in-progress\]/m.test(e));
  following.child.kill('SIGINT');
  const stopped = await following;
  expect(stopped.status).toBe(130);
  const runId = /^Workflow run (\S+): /m.exec(stopped.stderr)![1]!;
  expect(lines(stopped.stderr).at(-1)).toBe(`Error: Stopped following; workflow run ${runId} continues on the server: xfer workflow-runs watch ${runId}`);
  await sleep(500);
  expect(await stack.api.data('GET', `/workflow-runs/${runId}`)).toMatchObject({ status: 'running', steps: [{ status: 'running' }] });

  const watching = background(['workflow-runs', 'watch', runId, '--json']);
  await sleep(1000);
  expect(watching.child.exitCode).toBeNull();
  const cancelled = await json(['workflow-runs', 'cancel', runId]);
  expect(cancelled.id).toBe(runId);
  const watched = await watching;
  expect(watched.status).toBe(7);
  const final = JSON.parse(watched.stdout);
  expect(final).toMatchObject({ id: runId, status: 'cancelled', error: 'the run was cancelled', steps: [{ status: 'cancelled' }] });
  expect(JSON.parse(watched.stderr)).toEqual({ error: `Workflow run ${runId} cancelled: the run was cancelled` });
  await waitFor('the transfer cancelled', () => stack.api.data<any>('GET', `/transfers/${final.steps[0].transfer_id}`), (t) => t.status === 'cancelled', 60_000);

  expect(await fails(['workflow-runs', 'cancel', runId])).toMatchObject({ status: 5 });
  expect((await fails(['workflow-runs', 'cancel', '0123456789abcdef01234567'])).status).toBe(4);
}, 150_000);

test('a schedule runs a workflow (schedules create|update --workflow): its run is followed with workflow-runs watch; the workflow cannot be deleted while named', async () => {
  const workflow = await json(['workflows', 'create', '--name', `scheduled ${run}`, '--steps', JSON.stringify([transferStep('/src', '/scheduled/{{run.id}}')])]);
  const base = ['schedules', 'create', '--name', `yearly ${run}`, '--cron', '0 0 1 1 *', '--no-active'];
  // The workflow by name, looked up by the CLI.
  const schedule = await json([...base, '--workflow', `scheduled ${run}`]);
  expect(schedule).toMatchObject({ workflowId: workflow.id, transfer: null });

  const started = await json(['schedules', 'run', schedule.id]);
  expect(started).toMatchObject({ trigger: 'manual', transfer_id: null, workflow_run_id: expect.stringMatching(/^[0-9a-f]{24}$/) });
  const watched = await xfer(['workflow-runs', 'watch', started.workflow_run_id, '--json']);
  expect(watched.status).toBe(0);
  expect(JSON.parse(watched.stdout)).toMatchObject({ id: started.workflow_run_id, workflow_id: workflow.id, status: 'completed', trigger: { type: 'schedule', id: schedule.id } });
  const table = await xfer(['schedules', 'runs', schedule.id]);
  expect(table.stdout).toMatch(/^ID +TRIGGER +SCHEDULED_FOR +STATUS +TRANSFER_ID +WORKFLOW_RUN_ID +ERROR$/m);
  expect(table.stdout).toMatch(new RegExp(`^${started.id} +manual +\\S+ +completed +- +${started.workflow_run_id} +-$`, 'm'));

  expect((await fails(['workflows', 'delete', workflow.id])).status).toBe(5);
  // Exactly one of a transfer and a workflow: the server says so; a transfer needs its four path flags.
  const transfer = ['--source', names.sftp, '--source-path', '/src', '--dest', names.s3, '--dest-path', '/x'];
  expect(await fails([...base, ...transfer, '--workflow', workflow.id])).toEqual({ status: 2, error: 'body must have exactly one of transfer and workflowId, not both' });
  expect(await fails(base)).toEqual({ status: 2, error: 'body must have exactly one of transfer and workflowId' });
  expect((await fails([...base, '--source', names.sftp])).status).toBe(2);
  // Back to a transfer, then to the workflow again.
  const toTransfer = await json(['schedules', 'update', schedule.id, ...transfer]);
  expect(toTransfer).toMatchObject({ workflowId: null, transfer: { sourceConnectionId: ids.sftp, destinationConnectionId: ids.s3, destinationPath: '/x' } });
  expect(await json(['schedules', 'update', schedule.id, '--workflow', workflow.id])).toMatchObject({ workflowId: workflow.id, transfer: null });
  await json(['schedules', 'delete', schedule.id]);
  expect(await json(['workflows', 'delete', workflow.id])).toEqual({ id: workflow.id, deleted: true });
}, 120_000);

test('on a terminal (script(1) pseudo-terminal) run --follow draws the ink view of the running transfer step, the step lines above it', async () => {
  const workflow = await json(['workflows', 'create', '--name', `tty ${run}`, '--steps', JSON.stringify([transferStep('/src', '/tty/{{run.id}}')])]);
  const cmd = [process.execPath, BINARIES.cli, 'workflows', 'run', workflow.id, '--follow'].map((a) => `'${a.replace(/'/g, `'\\''`)}'`).join(' ');
  const res = spawnSync('script', ['-qfec', `stty cols 200 rows 40; ${cmd}`, '/dev/null'], {
    env: cliEnv(home, { XFER_URL: stack.url, XFER_API_KEY: stack.api.token }), encoding: 'utf8', timeout: 120_000,
  });
  expect(res.status).toBe(0);
  const screen = res.stdout.replace(/\u001b\[[0-9;?]*[A-Za-z]/g, '');
  expect(screen).toMatch(/Step 1\/1 transfer: running \(transfer [0-9a-f]{24}\)/);
  expect(screen).toContain('█'.repeat(24));
  expect(screen).toContain('100%');
  expect(screen).toContain(`${SMALL}/${SMALL} files`);
  expect(screen).toContain(`Step 1/1 transfer: completed (${SMALL}/${SMALL} files, 12.0 kB)`);
  expect(screen).toMatch(/^status: +completed\r?$/m);
}, 120_000);

// Last: it stops the control plane.
test('the server going away while following: exit 6 after the retries, naming the command that resumes', async () => {
  const workflow = await json(['workflows', 'create', '--name', `orphan ${run}`, '--steps', JSON.stringify([transferStep('/slow', '/orphan/{{run.id}}', { options: { concurrency: 1 } })])]);
  const started = await json(['workflows', 'run', workflow.id]);
  const p = background(['workflow-runs', 'watch', started.id]);
  await p.until((e) => e.includes('Step 1/1 transfer: running'));
  stack.server.child.kill('SIGKILL');
  expect((await p).status).toBe(6);
  const told = lines(p.printed().stderr);
  expect(told.at(-1)).toMatch(new RegExp(`^Error: Connection refused .+ \\(workflow run ${started.id} continues on the server; follow it again with xfer workflow-runs watch ${started.id}\\)$`));
  expect(told.filter((l) => l.startsWith('Error:'))).toHaveLength(1);
}, 120_000);
