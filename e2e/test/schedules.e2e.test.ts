import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CreateBucketCommand, type S3Client } from '@aws-sdk/client-s3';
import { startStack, type Stack } from '../src/stack.js';
import { cliEnv, jsonOf, runCli } from './support/cli.js';
import { sftpAndS3, waitFor } from './support/stack-helpers.js';
import { digestBucket, s3Client, treeDiff, writeTree, type Digests } from './support/trees.js';

/**
 * Schedules with the real binaries (issue 15 acceptance): two `xfer-server` instances over one
 * database and one `xfer-agent`; a schedule `* * * * *` made with the CLI fires within 65 s, its
 * transfer copies sftp → s3 into a folder named by `{{run.id}}`, and each due time has exactly one
 * run and one transfer although both instances' loops look for it.
 */
const env = process.env;
const run = randomBytes(4).toString('hex');
const bucket = `e2e-schedules-${run}`;
const sftpRoot = join(env.XFER_TEST_SFTP_ROOT!, `e2e-schedules-${run}`);
let stack: Stack;
let s3: S3Client;
let home: string;
let expected: Digests;
const ids = { sftp: '', s3: '' };

const cli = (args: string[]) => runCli(args, { env: cliEnv(home, { XFER_URL: stack.url, XFER_API_KEY: stack.api.token }), timeoutMs: 60_000 });
const xfer = <T = any>(args: string[]): T => jsonOf<T>(cli([...args, '--json']));

beforeAll(async () => {
  s3 = s3Client(env);
  await s3.send(new CreateBucketCommand({ Bucket: bucket }));
  expected = await writeTree(join(sftpRoot, 'src'), { count: 12, bigBytes: 256 * 1024 });
  spawnSync('chown', ['-R', `${env.XFER_TEST_SFTP_USER}:`, sftpRoot]);
  stack = await startStack({ env, instances: 2, serverEnv: { XFER_DISPATCH_POLL_MS: '200' } });
  Object.assign(ids, await sftpAndS3(stack, 'schedules', sftpRoot, bucket));
  await stack.startAgent(`schedules-${run}`);
  home = mkdtempSync(join(tmpdir(), 'xfer-cli-schedules-'));
}, 180_000);

afterAll(async () => {
  await stack?.stop();
  rmSync(sftpRoot, { recursive: true, force: true });
  if (home) rmSync(home, { recursive: true, force: true });
}, 60_000);

test('a * * * * * schedule fires within 65 s, once per due time across two instances, and its transfer copies every file', async () => {
  const created = Date.now();
  const schedule = xfer<{ id: string; next_run_at: string; created_at: string }>([
    'schedules', 'create', '--name', `every minute ${run}`, '--cron', '* * * * *', '--overlap', 'queue',
    '--source', ids.sftp, '--source-path', '/src', '--dest', ids.s3, '--dest-path', '/{{run.id}}',
  ]);
  // Measured from when the server made it: a loaded machine takes seconds to start the CLI.
  const made = new Date(schedule.created_at).getTime();
  expect(made).toBeGreaterThanOrEqual(created - 1_000);
  expect(new Date(schedule.next_run_at).getTime() - made).toBeLessThanOrEqual(60_000);

  type Run = { id: string; scheduled_for: string; started_at: string; status: string; transfer_id: string | null };
  const runs = () => stack.liveApi().data<Run[]>('GET', `/schedules/${schedule.id}/runs?limit=100`);
  const [first] = await waitFor('the first run to complete', runs, (r) => r.some((x) => x.status === 'completed'), 65_000 + 60_000)
    .then((r) => r.filter((x) => x.status === 'completed'));
  expect(new Date(first!.started_at).getTime() - made).toBeLessThan(65_000);
  expect(new Date(first!.started_at).getTime() - new Date(first!.scheduled_for).getTime()).toBeLessThan(5_000);

  // Both instances have had several passes since: still one run, and one transfer, per due time.
  await new Promise((r) => setTimeout(r, 3_000));
  const all = xfer<Run[]>(['schedules', 'runs', schedule.id, '--all']);
  expect(new Set(all.map((r) => r.scheduled_for)).size).toBe(all.length);
  const transfers = await stack.api.data<Array<{ id: string; name: string }>>('GET', '/transfers?limit=100');
  const fired = transfers.filter((t) => t.name === `every minute ${run}`).map((t) => t.id).sort();
  expect(fired).toEqual(all.map((r) => r.transfer_id).sort());

  const copied = await digestBucket(s3, bucket, first!.id);
  expect(treeDiff(expected, copied.files)).toEqual([]);

  xfer(['schedules', 'delete', schedule.id]);
}, 240_000);

test('the CLI manages a schedule: paused create with a parameter in a path, update of one path, run now, history, a refused cron', async () => {
  await stack.api.data('POST', '/parameters', { name: 'mirror_root', value: `mirror-${run}` });
  const name = `cli schedule ${run}`;
  const created = xfer<{ id: string; active: boolean; next_run_at: string | null; transfer: Record<string, unknown> }>([
    'schedules', 'create', '--name', name, '--cron', '30 2 * * 1-5', '--timezone', 'Europe/Berlin', '--no-active',
    '--source', 'schedules sftp', '--source-path', '/src', '--dest', 'schedules s3', '--dest-path', '/{{params.mirror_root}}/old', '--verify', 'size',
  ]);
  expect(created).toMatchObject({ active: false, next_run_at: null, transfer: { sourceConnectionId: ids.sftp, destinationConnectionId: ids.s3 } });

  // One transfer flag: the rest of the transfer stays as it was.
  const updated = xfer(['schedules', 'update', created.id, '--dest-path', '/{{params.mirror_root}}/{{run.id}}']);
  expect(updated.transfer).toMatchObject({ sourceConnectionId: ids.sftp, sourcePath: '/src', destinationPath: '/{{params.mirror_root}}/{{run.id}}', options: { verify: 'size' } });
  expect(xfer(['schedules', 'get', created.id]).transfer.destinationPath).toBe('/{{params.mirror_root}}/{{run.id}}');
  expect(xfer<Array<{ id: string }>>(['schedules', 'list', '--all']).map((s) => s.id)).toContain(created.id);

  const started = xfer<{ id: string; trigger: string; status: string; transfer_id: string }>(['schedules', 'run', created.id]);
  expect(started).toMatchObject({ trigger: 'manual', status: 'queued' });
  await waitFor('the manual run to complete', () => stack.api.data('GET', `/transfers/${started.transfer_id}`), (t: { status: string }) => t.status === 'completed');
  const copied = await digestBucket(s3, bucket, `mirror-${run}/${started.id}`);
  expect(treeDiff(expected, copied.files)).toEqual([]);
  expect(xfer<Array<{ id: string; status: string }>>(['schedules', 'runs', created.id])).toEqual([expect.objectContaining({ id: started.id, status: 'completed' })]);

  const refused = cli(['schedules', 'update', created.id, '--cron', '0 0 * * * *']);
  expect(refused.status).toBe(2);
  expect(refused.stderr).toContain('cron must have exactly 5 fields');
  xfer(['schedules', 'delete', created.id]);
  expect(cli(['schedules', 'get', created.id]).status).toBe(4);
}, 120_000);
