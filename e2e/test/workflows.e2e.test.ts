import { spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CreateBucketCommand, PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { startStack, type Stack } from '../src/stack.js';
import { makeTestCertificate, WebhookReceiver, type TestCertificate } from '../src/tools/webhook-receiver.js';
import { sftpAndS3, waitFor } from './support/stack-helpers.js';
import { digestBucket, digestDir, s3Client, treeDiff, type Digests } from './support/trees.js';

/**
 * Workflows with the real binaries and servers (issue 15 acceptance): one `xfer-server`, one
 * `xfer-agent`, the test sshd and versitygw, and an HTTPS webhook receiver checking signatures.
 * transfer → move_source → notify(webhook_event) moves exactly the files whose copies were
 * verified (a file the destination already had is skipped, not verified, and stays); a failing
 * transfer step leaves the source untouched and skips the rest; and the worked example of
 * docs/automation.md: a watcher on an inbox runs the workflow once per file, which archives it.
 */
const env = process.env;
const run = randomBytes(4).toString('hex');
const bucket = `e2e-workflows-${run}`;
const sftpRoot = join(env.XFER_TEST_SFTP_ROOT!, `e2e-workflows-${run}`);
const HOOK_PATH = '/xfer-workflows';
let stack: Stack;
let s3: S3Client;
let cert: TestCertificate;
let receiver: WebhookReceiver;
const ids = { sftp: '', s3: '', missing: '' };

type Run = { id: string; status: string; error: string | null; steps: Array<{ type: string; status: string; transfer_id: string | null; files: Record<string, number> | null; error: string | null }> };
const digest = (data: Buffer) => createHash('sha256').update(data).digest('hex');
const chown = () => spawnSync('chown', ['-R', `${env.XFER_TEST_SFTP_USER}:`, sftpRoot]);

/** Writes files under the sftp root; returns their digests by path relative to `dir`. */
function writeFiles(dir: string, names: string[]): Digests {
  const digests: Digests = new Map();
  for (const name of names) {
    const data = randomBytes(20_000 + names.indexOf(name));
    mkdirSync(join(sftpRoot, dir, name, '..'), { recursive: true });
    writeFileSync(join(sftpRoot, dir, name), data);
    digests.set(name, digest(data));
  }
  chown();
  return digests;
}

async function ended(runId: string, timeoutMs = 90_000): Promise<Run> {
  return waitFor(`run ${runId} ends`, () => stack.api.data<Run>('GET', `/workflow-runs/${runId}`), (r) => !['queued', 'running'].includes(r.status), timeoutMs);
}

/** The events of `type` the receiver got (their signatures checked by the receiver), as parsed bodies. */
const received = (type: string) => receiver.to(HOOK_PATH).map((r) => JSON.parse(r.body.toString('utf8')) as { event: string; data: Record<string, any> }).filter((b) => b.event === type);

beforeAll(async () => {
  cert = makeTestCertificate({ ips: ['127.0.0.1'] });
  receiver = await WebhookReceiver.start(cert);
  s3 = s3Client(env);
  await s3.send(new CreateBucketCommand({ Bucket: bucket }));
  mkdirSync(sftpRoot, { recursive: true });
  chown();
  stack = await startStack({
    env,
    serverEnv: { XFER_DISPATCH_POLL_MS: '200', XFER_UNSAFE_WEBHOOK_ALLOW: '127.0.0.1/32', NODE_EXTRA_CA_CERTS: cert.certPath, XFER_WEBHOOK_POLL_MS: '100' },
  });
  Object.assign(ids, await sftpAndS3(stack, 'workflows', sftpRoot, bucket));
  ids.missing = (await stack.api.data('POST', '/connections', {
    name: 'workflows s3 without its bucket', type: 's3', host: env.XFER_TEST_S3_HOST, port: Number(env.XFER_TEST_S3_PORT), path: `/${bucket}-missing`,
    options: { secure: false, force_path_style: true },
    credentials: { access_key_id: env.XFER_TEST_S3_ACCESS_KEY, secret_access_key: env.XFER_TEST_S3_SECRET_KEY },
  })).id;
  const hook = await stack.api.call<{ data: { id: string; secret: string } }>('POST', '/webhooks', {
    url: receiver.url(HOOK_PATH), events: ['workflow.notify', 'workflow.completed', 'workflow.failed'],
  });
  if (hook.status !== 201) throw new Error(`create webhook: ${hook.status} ${JSON.stringify(hook.body)}`);
  receiver.secrets.set(HOOK_PATH, hook.body.data.secret);
  await stack.startAgent(`workflows-${run}`);
}, 180_000);

afterAll(async () => {
  await stack?.stop();
  await receiver?.stop();
  cert?.remove();
  rmSync(sftpRoot, { recursive: true, force: true });
}, 60_000);

test('transfer → move_source → notify(webhook_event): only the verified files are moved, then the webhook is told', async () => {
  const moved = writeFiles('inbox', ['a.csv', 'b.csv', 'sub/c.csv']);
  const kept = writeFiles('inbox', ['kept.csv']);
  // The destination already has kept.csv: with overwrite "never" it is skipped, so this transfer never verified a copy of it.
  await s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'archive/kept.csv', Body: 'an older, different copy' }));
  const workflow = await stack.api.data<{ id: string }>('POST', '/workflows', {
    name: `inbox to archive ${run}`,
    steps: [
      { type: 'transfer', sourceConnectionId: ids.sftp, sourcePath: '/inbox', destinationConnectionId: ids.s3, destinationPath: '/archive', options: { overwrite: 'never' } },
      { type: 'move_source', to: '/done/{{date:YYYY-MM-DD}}' },
      { type: 'notify', channel: 'webhook_event', subject: 'inbox archived' },
    ],
  });
  const started = await stack.api.data<Run>('POST', `/workflows/${workflow.id}/run`, {}, 201);
  const done = await ended(started.id);
  expect(done).toMatchObject({
    status: 'completed', error: null,
    steps: [
      { type: 'transfer', status: 'completed' },
      { type: 'move_source', status: 'completed', files: { moved: 3, deleted: 0, gone: 0, changed: 0, unverified: 1, failed: 0 } },
      { type: 'notify', status: 'completed' },
    ],
  });
  // The copies are at the destination; the moved files under done/<date>, with the same bytes; the unverified one where it was.
  expect(treeDiff(moved, (await digestBucket(s3, bucket, 'archive')).files.set('kept.csv', moved.get('a.csv')!)).filter((d) => !d.includes('kept.csv'))).toEqual([]);
  const day = new Date().toISOString().slice(0, 10);
  expect(treeDiff(moved, (await digestDir(join(sftpRoot, 'done', day))).files)).toEqual([]);
  expect(treeDiff(kept, (await digestDir(join(sftpRoot, 'inbox'))).files)).toEqual([]);
  // The webhook got the notify event, then the run's end, signed.
  const notified = await waitFor('workflow.notify delivered', async () => received('workflow.notify'), (l) => l.some((b) => b.data.run_id === started.id), 60_000);
  expect(notified.find((b) => b.data.run_id === started.id)!.data).toMatchObject({ workflow_id: workflow.id, subject: 'inbox archived', steps: [{ status: 'completed' }, { status: 'completed', files: { moved: 3 } }, { type: 'notify' }] });
  await waitFor('workflow.completed delivered', async () => received('workflow.completed'), (l) => l.some((b) => b.data.run_id === started.id), 60_000);
}, 240_000);

test('a failing transfer step leaves the source untouched, skips the rest and tells the webhook it failed', async () => {
  const source = writeFiles('outbox', ['x.csv', 'y/z.csv']);
  const workflow = await stack.api.data<{ id: string }>('POST', '/workflows', {
    name: `to a missing bucket ${run}`,
    steps: [
      { type: 'transfer', sourceConnectionId: ids.sftp, sourcePath: '/outbox', destinationConnectionId: ids.missing, destinationPath: '/archive' },
      { type: 'delete_source' },
      { type: 'notify', channel: 'webhook_event' },
    ],
  });
  const started = await stack.api.data<Run>('POST', `/workflows/${workflow.id}/run`, {}, 201);
  const done = await ended(started.id);
  expect(done).toMatchObject({ status: 'failed', steps: [{ status: 'failed' }, { status: 'skipped' }, { status: 'skipped' }] });
  expect(done.error).toMatch(/^steps\[0\] \(transfer\): its transfer [0-9a-f]{24} failed: /);
  expect(treeDiff(source, (await digestDir(join(sftpRoot, 'outbox'))).files)).toEqual([]);
  await waitFor('workflow.failed delivered', async () => received('workflow.failed'), (l) => l.some((b) => b.data.run_id === started.id), 60_000);
  expect(received('workflow.notify').some((b) => b.data.run_id === started.id)).toBe(false);
}, 240_000);

test('inbox → archive: a watcher runs the workflow once per new file, which copies it and moves it out of the inbox', async () => {
  mkdirSync(join(sftpRoot, 'drop'), { recursive: true });
  chown();
  const workflow = await stack.api.data<{ id: string }>('POST', '/workflows', {
    name: `drop to archive ${run}`,
    steps: [
      { type: 'transfer', sourceConnectionId: ids.sftp, sourcePath: '/{{file.path}}', destinationConnectionId: ids.s3, destinationPath: '/dropped' },
      { type: 'move_source', to: '/processed' },
    ],
  });
  const watcher = await stack.api.data<{ id: string }>('POST', '/watchers', {
    name: `drop ${run}`, connectionId: ids.sftp, path: '/drop', pattern: '*.csv', poll_interval_seconds: 10, stable_seconds: 1, action: { workflowId: workflow.id },
  });
  const files = writeFiles('drop', ['one.csv', 'two.csv', 'three.csv']);
  type Event = { path: string; action_status: string; workflow_run_id: string | null };
  const events = await waitFor('three events whose runs completed', () => stack.api.data<Event[]>('GET', `/watchers/${watcher.id}/events`),
    (e) => e.length === 3 && e.every((x) => x.action_status === 'completed'), 120_000);
  expect(events.map((e) => e.path).sort()).toEqual(['drop/one.csv', 'drop/three.csv', 'drop/two.csv']);
  expect(new Set(events.map((e) => e.workflow_run_id)).size).toBe(3);
  const runs = await stack.api.data<Run[]>('GET', `/workflows/${workflow.id}/runs`);
  expect(runs.map((r) => r.status)).toEqual(['completed', 'completed', 'completed']);
  expect(treeDiff(files, (await digestBucket(s3, bucket, 'dropped')).files)).toEqual([]);
  expect(treeDiff(files, (await digestDir(join(sftpRoot, 'processed'))).files)).toEqual([]);
  expect(['one.csv', 'two.csv', 'three.csv'].some((n) => existsSync(join(sftpRoot, 'drop', n)))).toBe(false);
  // The files moved out of the inbox are not new files to the watcher: no more runs.
  await new Promise((r) => setTimeout(r, 12_000));
  expect((await stack.api.data<Run[]>('GET', `/workflows/${workflow.id}/runs`)).length).toBe(3);
  expect(readFileSync(join(sftpRoot, 'processed', 'one.csv')).length).toBe(20_000);
}, 300_000);
