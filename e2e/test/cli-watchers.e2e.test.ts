import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CreateBucketCommand } from '@aws-sdk/client-s3';
import { startStack, type Stack } from '../src/stack.js';
import { cliEnv, jsonFailure, jsonOf, startCli, type CliFailure, type CliRun } from './support/cli.js';
import { sftpAndS3, waitFor } from './support/stack-helpers.js';
import { s3Client } from './support/trees.js';

/**
 * `xfer watchers …` run as the built binary against a real control plane: flags to fields and
 * back, an update that changes one field (one transfer flag included) and keeps the rest, the
 * server's 400s naming the field (exit 2), a connection name looked up or unknown (exit 4), the
 * events of a new watcher, delete; then, with a real agent, the events of files that arrive in an
 * sftp folder, paged through. How a watcher treats files (stability, once per version, restarts)
 * is watchers.e2e.test.ts's.
 */
const env = process.env;
const run = randomBytes(3).toString('hex');
const bucket = `e2e-cli-watchers-${run}`;
const sftpRoot = join(env.XFER_TEST_SFTP_ROOT!, `e2e-cli-watchers-${run}`);
let stack: Stack;
let home: string;
/** Connections nothing serves (no agent has them to poll), for the tests of fields. */
const conn = { src: { id: '', name: `watch-src-${run}` }, dst: { id: '', name: `watch-dst-${run}` } };

const xfer = (args: string[]): Promise<CliRun> => startCli(args, { env: cliEnv(home, { XFER_URL: stack.url, XFER_API_KEY: stack.api.token }) });
const json = async <T = any>(args: string[]): Promise<T> => jsonOf<T>(await xfer([...args, '--json']));
/** A failure with --json: the exit code and the error (support/cli.ts `jsonFailure`). */
const fails = async (args: string[]): Promise<CliFailure> => jsonFailure(await xfer([...args, '--json']));

/** What the agents and the assignment loop change on their own, left out where a test compares whole watchers. */
const settled = ({ agent_id: _a, last_poll_at: _p, last_error: _e, ...rest }: Record<string, unknown>) => rest;

beforeAll(async () => {
  await s3Client(env).send(new CreateBucketCommand({ Bucket: bucket }));
  mkdirSync(join(sftpRoot, 'drop'), { recursive: true });
  spawnSync('chown', ['-R', `${env.XFER_TEST_SFTP_USER}:`, sftpRoot]);
  stack = await startStack({ env, serverEnv: { XFER_DISPATCH_POLL_MS: '200' } });
  home = mkdtempSync(join(tmpdir(), 'xfer-cli-watchers-'));
  for (const c of [conn.src, conn.dst]) {
    c.id = (await stack.api.data<{ id: string }>('POST', '/connections', { name: c.name, type: 'nfs', host: '127.0.0.1', path: '/export' })).id;
  }
}, 120_000);

afterAll(async () => {
  if (home) rmSync(home, { recursive: true, force: true });
  await stack?.stop();
  rmSync(sftpRoot, { recursive: true, force: true });
}, 60_000);

/** A paused watcher of `conn.src` made through the API, for the tests that need one to exist. */
const apiWatcher = (name: string) => stack.api.data<{ id: string }>('POST', '/watchers', {
  name, connectionId: conn.src.id, path: '/in', active: false, action: { transfer: { destinationConnectionId: conn.dst.id, destinationPath: '/out' } },
});

test('create with every flag (connections by name), then get and list show it, as JSON and for people', async () => {
  const name = `inbox ${run}`;
  const created = await json([
    'watchers', 'create', '--name', name, '--connection', conn.src.name, '--path', '/inbox', '--pattern', '*.csv', '--recursive',
    '--poll-interval', '30', '--stable', '5', '--include-existing', '--no-active',
    '--dest', conn.dst.name, '--dest-path', '/archive/{{file.name}}', '--verify', 'size', '--overwrite', 'never', '--concurrency', '2',
  ]);
  expect(created).toMatchObject({
    name, connectionId: conn.src.id, path: '/inbox', pattern: '*.csv', recursive: true, poll_interval_seconds: 30, stable_seconds: 5,
    include_existing: true, active: false,
    action: {
      transfer: { destinationConnectionId: conn.dst.id, destinationPath: '/archive/{{file.name}}', options: { verify: 'size', overwrite: 'never', concurrency: 2 } },
      workflowId: null,
    },
  });
  expect(settled(await json(['watchers', 'get', created.id]))).toEqual(settled(created));
  expect(settled(await stack.api.data('GET', `/watchers/${created.id}`))).toEqual(settled(created));
  expect((await json<Array<{ id: string }>>(['watchers', 'list', '--all'])).map((w) => w.id)).toContain(created.id);

  const human = await xfer(['watchers', 'get', created.id]);
  expect(human.status).toBe(0);
  expect(human.stdout).toMatch(/^pattern: +\*\.csv$/m);
  expect(human.stdout).toMatch(/^poll_interval_seconds: +30$/m);
  expect(human.stdout).toContain('"destinationPath":"/archive/{{file.name}}"');
  const table = await xfer(['watchers', 'list', '--limit', '1000']);
  expect(table.status).toBe(0);
  expect(table.stdout).toMatch(/^ID +NAME +PATH +PATTERN +ACTIVE +AGENT_ID +LAST_POLL_AT +LAST_ERROR$/m);
  expect(table.stdout).toMatch(new RegExp(`^${created.id} +${name} +/inbox +\\*\\.csv +false +- +- +-$`, 'm'));

  // With only what is required, the server's defaults.
  const plain = await json(['watchers', 'create', '--name', `${name} plain`, '--connection', conn.src.id, '--path', '/', '--dest', conn.dst.id, '--dest-path', '/']);
  expect(plain).toMatchObject({ pattern: '*', recursive: false, poll_interval_seconds: 60, stable_seconds: 10, include_existing: false, active: true });
  await json(['watchers', 'delete', plain.id]);
}, 60_000);

test('update changes only the fields given: one transfer flag keeps the rest of the action; no flag is exit 2 before any call', async () => {
  const created = await json([
    'watchers', 'create', '--name', `update ${run}`, '--connection', conn.src.name, '--path', '/in', '--pattern', '*.xml', '--no-active',
    '--dest', conn.dst.name, '--dest-path', '/out/{{file.name}}', '--verify', 'size',
  ]);
  const slower = await json(['watchers', 'update', created.id, '--poll-interval', '120']);
  expect(settled(slower)).toEqual({ ...settled(created), poll_interval_seconds: 120, updated_at: slower.updated_at });

  const moved = await json(['watchers', 'update', created.id, '--dest-path', '/out/{{date:YYYY}}/{{file.name}}', '--concurrency', '4']);
  expect(moved.action).toEqual({
    transfer: { destinationConnectionId: conn.dst.id, destinationPath: '/out/{{date:YYYY}}/{{file.name}}', options: { ...created.action.transfer.options, concurrency: 4 } },
    workflowId: null,
  });
  expect(moved).toMatchObject({ pattern: '*.xml', poll_interval_seconds: 120, active: false });
  expect((await json(['watchers', 'update', created.id, '--active', '--no-recursive'])).active).toBe(true);

  expect(await fails(['watchers', 'update', created.id])).toEqual({ status: 2, error: 'Nothing to update: give at least one flag' });
  expect(await fails(['watchers', 'update', '0123456789abcdef01234567', '--name', 'x'])).toEqual({ status: 4, error: 'Watcher 0123456789abcdef01234567 not found' });
  await json(['watchers', 'delete', created.id]);
}, 60_000);

test('bad input: exit 2 with the server\'s message naming the field, exit 4 for an unknown connection name, and nothing is created', async () => {
  const name = `refused ${run}`;
  const base = ['watchers', 'create', '--name', name, '--connection', conn.src.name, '--path', '/in'];
  const dest = ['--dest', conn.dst.name, '--dest-path', '/out'];
  const server = async (body: Record<string, unknown>) => {
    const res = await stack.api.call('POST', '/watchers', {
      name, connectionId: conn.src.id, path: '/in', action: { transfer: { destinationConnectionId: conn.dst.id, destinationPath: '/out' } }, ...body,
    });
    expect(res.status).toBe(400);
    return (res.body as { error: string }).error;
  };

  const interval = await fails([...base, ...dest, '--poll-interval', '5']);
  expect(interval).toEqual({ status: 2, error: await server({ poll_interval_seconds: 5 }) });
  expect(interval.error).toMatch(/^poll_interval_seconds /);
  const pattern = await fails([...base, ...dest, '--pattern', 'sub/*.csv']);
  expect(pattern).toEqual({ status: 2, error: await server({ pattern: 'sub/*.csv' }) });
  expect(pattern.error).toMatch(/^pattern /);
  expect((await fails([...base, ...dest, '--stable=-1'])).error).toMatch(/^stable_seconds /);

  const unknownId = 'fedcba9876543210fedcba98';
  expect(await fails(['watchers', 'create', '--name', name, '--connection', unknownId, '--path', '/in', ...dest]))
    .toEqual({ status: 2, error: `connectionId: connection ${unknownId} not found` });
  expect(await fails([...base, '--dest', unknownId, '--dest-path', '/out']))
    .toEqual({ status: 2, error: `action.transfer.destinationConnectionId: connection ${unknownId} not found` });
  expect(await fails([...base, '--dest', `nowhere-${run}`, '--dest-path', '/out'])).toEqual({ status: 4, error: `No connection with the id or name "nowhere-${run}"` });

  const both = await fails([...base, ...dest, '--workflow', '0123456789abcdef01234567']);
  expect(both).toEqual({ status: 2, error: 'action must have exactly one of transfer and workflowId, not both' });
  expect(await fails([...base, '--workflow', '0123456789abcdef01234567'])).toEqual({ status: 2, error: 'action.workflowId: workflow 0123456789abcdef01234567 not found' });
  expect((await fails(base)).error).toMatch(/^action must have exactly one of transfer and workflowId/);
  expect((await fails([...base, '--dest', conn.dst.name])).status).toBe(2);

  const made = await stack.api.data<Array<{ name: string }>>('GET', '/watchers?limit=1000');
  expect(made.map((w) => w.name)).not.toContain(name);
}, 90_000);

test('the events of a new watcher: an empty list (JSON [], --all too; "No results" for people)', async () => {
  const watcher = await apiWatcher(`events ${run}`);
  const page = await xfer(['watchers', 'events', watcher.id, '--json']);
  expect({ status: page.status, stdout: page.stdout }).toEqual({ status: 0, stdout: '[]\n' });
  const all = await xfer(['watchers', 'events', watcher.id, '--all', '--limit', '10', '--json']);
  expect({ status: all.status, stdout: all.stdout }).toEqual({ status: 0, stdout: '[]\n' });
  const human = await xfer(['watchers', 'events', watcher.id]);
  expect({ status: human.status, stdout: human.stdout }).toEqual({ status: 0, stdout: 'No results\n' });
  expect((await fails(['watchers', 'events', '0123456789abcdef01234567'])).status).toBe(4);
}, 60_000);

test('delete: the watcher is gone (get and events exit 4, so does a second delete)', async () => {
  const watcher = await apiWatcher(`delete ${run}`);
  const human = await xfer(['watchers', 'delete', watcher.id]);
  expect({ status: human.status, stdout: human.stdout }).toEqual({ status: 0, stdout: `Deleted watcher ${watcher.id}\n` });
  expect(await fails(['watchers', 'get', watcher.id])).toEqual({ status: 4, error: `Watcher ${watcher.id} not found` });
  expect((await fails(['watchers', 'events', watcher.id])).status).toBe(4);
  expect((await fails(['watchers', 'delete', watcher.id])).status).toBe(4);
  expect((await stack.api.call('GET', `/watchers/${watcher.id}`)).status).toBe(404);

  const other = await apiWatcher(`delete json ${run}`);
  expect(await json(['watchers', 'delete', other.id])).toEqual({ id: other.id, deleted: true });
}, 60_000);

test('files that arrive: events lists each version newest first with its transfer, --all pages through them', async () => {
  const names = await sftpAndS3(stack, `cli-watchers-${run}`, sftpRoot, bucket);
  await stack.startAgent(`cli-watchers-${run}`);
  const watcher = await json([
    'watchers', 'create', '--name', `drop ${run}`, '--connection', `cli-watchers-${run} sftp`, '--path', '/drop', '--pattern', '*.txt',
    '--poll-interval', '10', '--stable', '0', '--dest', `cli-watchers-${run} s3`, '--dest-path', '/landed/{{run.id}}',
  ]);
  expect(watcher.action.transfer.destinationConnectionId).toBe(names.s3);
  const events = () => stack.api.data<Array<{ path: string; action_status: string }>>('GET', `/watchers/${watcher.id}/events`);
  // One after the other, so that they are seen in that order.
  for (const [i, file] of ['first.txt', 'second.txt'].entries()) {
    writeFileSync(join(sftpRoot, 'drop', file), `file ${i}\n`);
    await waitFor(`${file} acted on and copied`, events, (e) => e.length === i + 1 && e.every((x) => x.action_status === 'completed'), 90_000);
  }

  const paged = await json<Array<{ id: string; path: string; size: number; action_status: string; transfer_id: string }>>(
    ['watchers', 'events', watcher.id, '--all', '--limit', '1']);
  expect(paged.map((e) => [e.path, e.size, e.action_status])).toEqual([['drop/second.txt', 7, 'completed'], ['drop/first.txt', 7, 'completed']]);
  expect(await json(['watchers', 'events', watcher.id, '--limit', '1'])).toEqual([paged[0]]);
  for (const e of paged) expect(await stack.api.data('GET', `/transfers/${e.transfer_id}`)).toMatchObject({ status: 'completed', destinationPath: `/landed/${e.id}` });
  const table = await xfer(['watchers', 'events', watcher.id]);
  expect(table.stdout).toMatch(/^ID +SEEN_AT +PATH +SIZE +STATUS +TRANSFER_ID +ERROR$/m);
  expect(table.stdout).toMatch(new RegExp(`^${paged[1]!.id} +\\S+ +drop/first\\.txt +7 B +completed +${paged[1]!.transfer_id} +-$`, 'm'));
  expect((await json(['watchers', 'get', watcher.id])).agent_id).toEqual(expect.any(String));
  await json(['watchers', 'delete', watcher.id]);
}, 150_000);
