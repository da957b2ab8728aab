import { spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { appendFileSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CreateBucketCommand, PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { startStack, type Stack } from '../src/stack.js';
import { sftpAndS3, waitFor } from './support/stack-helpers.js';
import { digestBucket, digestDir, s3Client, treeDiff, type Digests } from './support/trees.js';

/**
 * Watchers with the real binaries and servers (issue 15 acceptance): one `xfer-server`, one
 * `xfer-agent`, the test sshd and versitygw. Twenty files arrive slowly (each changing for 3 s)
 * in a watched folder, and the control plane is killed and started again in the middle: every
 * file is copied once, complete (never a version seen while it still changed), nothing twice, no
 * file that was there before the watcher, none that does not match its pattern. Once with an
 * sftp folder as the watched one (copied to s3), once with an s3 prefix (copied to sftp).
 */
const env = process.env;
const run = randomBytes(4).toString('hex');
const bucket = `e2e-watchers-${run}`;
const sftpRoot = join(env.XFER_TEST_SFTP_ROOT!, `e2e-watchers-${run}`);
const FILES = 20;
let stack: Stack;
let s3: S3Client;
const ids = { sftp: '', s3: '' };

beforeAll(async () => {
  s3 = s3Client(env);
  await s3.send(new CreateBucketCommand({ Bucket: bucket }));
  mkdirSync(join(sftpRoot, 'inbox'), { recursive: true });
  mkdirSync(join(sftpRoot, 'landed'), { recursive: true });
  spawnSync('chown', ['-R', `${env.XFER_TEST_SFTP_USER}:`, sftpRoot]);
  stack = await startStack({ env, serverEnv: { XFER_DISPATCH_POLL_MS: '200' } });
  Object.assign(ids, await sftpAndS3(stack, 'watchers', sftpRoot, bucket));
  await stack.startAgent(`watchers-${run}`);
}, 180_000);

afterAll(async () => {
  await stack?.stop();
  rmSync(sftpRoot, { recursive: true, force: true });
}, 60_000);

type Event = { path: string; size: number; version: string; action_status: string; transfer_id: string | null };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const digest = (data: Buffer) => createHash('sha256').update(data).digest('hex');

/**
 * Writes `FILES` files, four at a time, each in six steps over 3 s (a file that grows on sftp, an
 * object written again on s3), through `write(name, content so far)`; kills and restarts the
 * control plane after half. Returns the final contents' digests by name, and the final sizes.
 */
async function arriveSlowly(write: (name: string, chunk: Buffer, first: boolean) => Promise<void>): Promise<{ digests: Digests; sizes: Map<string, number> }> {
  const digests: Digests = new Map();
  const sizes = new Map<string, number>();
  const one = async (i: number) => {
    const name = `f${String(i).padStart(2, '0')}.dat`;
    const parts: Buffer[] = [];
    for (let step = 0; step < 6; step++) {
      const chunk = randomBytes(10_000 + i * 100 + step);
      parts.push(chunk);
      await write(name, chunk, step === 0);
      await sleep(500);
    }
    const all = Buffer.concat(parts);
    digests.set(name, digest(all));
    sizes.set(name, all.length);
  };
  for (let i = 0; i < FILES; i += 4) {
    if (i === FILES / 2 - 2) {
      // The control plane dies in the middle (kill -9, no goodbye) and comes back.
      await stack.killServer(0);
      await sleep(1_500);
      await stack.restartServer(0);
    }
    await Promise.all([0, 1, 2, 3].map((k) => one(i + k)));
  }
  return { digests, sizes };
}

/** Waits until the watcher acted on `FILES` versions and every transfer ended; checks each file once, complete. */
async function expectEachOnce(watcherId: string, name: string, sizes: Map<string, number>): Promise<Event[]> {
  const events = await waitFor(`${FILES} events, each transfer ended`, async () => (await stack.liveApi().data<Event[]>('GET', `/watchers/${watcherId}/events?limit=100`)),
    (e) => e.length >= FILES && e.every((x) => ['completed', 'failed', 'cancelled', 'unknown'].includes(x.action_status)), 120_000);
  // A few more polls: nothing more comes.
  await sleep(12_000);
  const after = await stack.liveApi().data<Event[]>('GET', `/watchers/${watcherId}/events?limit=100`);
  expect(after.map((e) => e.path).sort()).toEqual([...sizes.keys()].map((n) => `inbox/${n}`).sort());
  for (const e of after) {
    // The version acted on is the complete file, never one seen while it still changed.
    expect({ path: e.path, size: e.size }).toEqual({ path: e.path, size: sizes.get(e.path.slice('inbox/'.length)) });
    expect({ path: e.path, status: e.action_status }).toEqual({ path: e.path, status: 'completed' });
  }
  const transfers = await stack.liveApi().data<Array<{ id: string; name: string }>>('GET', '/transfers?limit=100');
  const made = transfers.filter((t) => t.name.startsWith(`${name}: `));
  expect(made.map((t) => t.id).sort()).toEqual(after.map((e) => e.transfer_id).sort());
  return events;
}

test('an sftp folder: 20 files arriving slowly and a control-plane restart in the middle → each copied to s3 once, complete', async () => {
  const inbox = join(sftpRoot, 'inbox');
  writeFileSync(join(inbox, 'before.dat'), 'there before the watcher');
  await sleep(1_100);
  const name = `sftp inbox ${run}`;
  const watcher = await stack.api.data<{ id: string }>('POST', '/watchers', {
    name, connectionId: ids.sftp, path: '/inbox', pattern: '*.dat', poll_interval_seconds: 10, stable_seconds: 2,
    action: { transfer: { destinationConnectionId: ids.s3, destinationPath: '/from-sftp' } },
  });
  writeFileSync(join(inbox, 'ignored.tmp'), 'does not match the pattern');
  const { digests, sizes } = await arriveSlowly(async (file, chunk, first) => {
    if (first) writeFileSync(join(inbox, file), chunk);
    else appendFileSync(join(inbox, file), chunk);
  });
  await expectEachOnce(watcher.id, name, sizes);
  const copied = await digestBucket(s3, bucket, 'from-sftp');
  expect(treeDiff(digests, copied.files)).toEqual([]);
}, 400_000);

test('an s3 prefix: 20 objects written again and again for 3 s each and a control-plane restart in the middle → each copied to sftp once, complete', async () => {
  await s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'inbox/before.dat', Body: 'there before the watcher' }));
  await sleep(1_100);
  const name = `s3 inbox ${run}`;
  const watcher = await stack.api.data<{ id: string }>('POST', '/watchers', {
    name, connectionId: ids.s3, path: '/inbox', pattern: '*.dat', poll_interval_seconds: 10, stable_seconds: 2,
    action: { transfer: { destinationConnectionId: ids.sftp, destinationPath: '/landed' } },
  });
  const sofar = new Map<string, Buffer[]>();
  const { digests, sizes } = await arriveSlowly(async (file, chunk, first) => {
    const parts = first ? [chunk] : [...sofar.get(file)!, chunk];
    sofar.set(file, parts);
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: `inbox/${file}`, Body: Buffer.concat(parts) }));
  });
  await expectEachOnce(watcher.id, name, sizes);
  const copied = await digestDir(join(sftpRoot, 'landed'));
  expect(treeDiff(digests, copied.files)).toEqual([]);
}, 400_000);

test('a file named {{params.X}}.csv in a watched sftp folder is copied under that very name, never as the path X spells (docs/security.md "Templates: data is never code")', async () => {
  // The attack of issue 24: X names a file in a sub-folder the watcher does not watch, under a
  // name its pattern would match. Rendered as a template, the found name would copy that file.
  const folder = join(sftpRoot, 'drop');
  mkdirSync(join(folder, 'private'), { recursive: true });
  writeFileSync(join(folder, 'private', 'salaries.csv'), 'never to leave this folder');
  const decoy = Buffer.from('the file that was dropped');
  writeFileSync(join(folder, '{{params.X}}.csv'), decoy);
  spawnSync('chown', ['-R', `${env.XFER_TEST_SFTP_USER}:`, folder]);
  await stack.api.data('POST', '/parameters', { name: 'X', value: 'private/salaries' });
  const watcher = await stack.api.data<{ id: string }>('POST', '/watchers', {
    name: `drop ${run}`, connectionId: ids.sftp, path: '/drop', pattern: '*.csv', include_existing: true, poll_interval_seconds: 10, stable_seconds: 1,
    action: { transfer: { destinationConnectionId: ids.s3, destinationPath: '/from-drop' } },
  });
  const [event] = await waitFor('the dropped file acted on', async () => stack.liveApi().data<Event[]>('GET', `/watchers/${watcher.id}/events`),
    (e) => e.length > 0 && e.every((x) => ['completed', 'failed', 'cancelled', 'unknown'].includes(x.action_status)), 120_000);
  expect(event).toMatchObject({ path: 'drop/{{params.X}}.csv', action_status: 'completed' });
  const job = await stack.api.data<{ sourcePath: string }>('GET', `/transfers/${event!.transfer_id}`);
  expect(job.sourcePath).toBe('/drop/{{params.X}}.csv');
  const copied = await digestBucket(s3, bucket, 'from-drop');
  expect([...copied.files]).toEqual([['{{params.X}}.csv', digest(decoy)]]);
}, 200_000);
