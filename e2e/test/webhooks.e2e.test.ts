import { randomBytes } from 'node:crypto';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { startStack, type Stack } from '../src/stack.js';
import { uploadFile } from '../src/tools/file-transfer.js';
import { makeTestCertificate, WebhookReceiver, type ReceivedRequest, type TestCertificate } from '../src/tools/webhook-receiver.js';
import { FIXTURES } from './support/connections.js';

/**
 * The webhook acceptance of the files-and-webhooks issue, with the real binaries: `xfer-server`
 * (loopback opened only by XFER_UNSAFE_WEBHOOK_ALLOW, the receiver's self-signed certificate
 * trusted through NODE_EXTRA_CA_CERTS, short backoff), a real agent moving files sftp → s3, and
 * uploads scanned by a real clamd. The HTTPS receiver checks every signature. It first hangs
 * (attempts time out), then is stopped (connections refused) while events are produced, then
 * comes back: every event arrives, none is lost, and the repeats carry the same X-Webhook-Delivery.
 */
const env = process.env;
const run = randomBytes(4).toString('hex');
const place = `e2e-hooks-${run}`;
const sftpRoot = join(env.XFER_TEST_SFTP_ROOT!, place);
const PATH = '/xfer-hooks';
const TIMEOUT_MS = 1_000;

let cert: TestCertificate;
let receiver: WebhookReceiver;
let stack: Stack;
let webhookId: string;
const ids = { sftp: '', s3: '' };
/** `<event> <data.id>` of every event the operations below must have produced. */
const expected = new Set<string>();

beforeAll(async () => {
  cert = makeTestCertificate({ ips: ['127.0.0.1'] });
  receiver = await WebhookReceiver.start(cert);
  mkdirSync(join(sftpRoot, 'src'), { recursive: true });
  for (let i = 0; i < 3; i++) writeFileSync(join(sftpRoot, 'src', `f${i}.txt`), `webhook e2e ${i} ${run}\n`);
  const sftp = FIXTURES.sftp!;
  const s3 = FIXTURES.s3!;
  await sftp.prepare(place);
  await s3.prepare(place);

  stack = await startStack({
    env,
    serverEnv: {
      XFER_CLAMD: env.XFER_TEST_CLAMD!,
      XFER_UNSAFE_WEBHOOK_ALLOW: '127.0.0.1/32',
      NODE_EXTRA_CA_CERTS: cert.certPath,
      XFER_WEBHOOK_TIMEOUT_MS: String(TIMEOUT_MS),
      XFER_WEBHOOK_BACKOFF_BASE_MS: '200',
      XFER_WEBHOOK_POLL_MS: '100',
      XFER_WEBHOOK_RETRY_WINDOW_MS: String(10 * 60_000),
    },
  });
  await stack.startAgent('e2e-hooks-agent');
  ids.sftp = (await stack.api.data('POST', '/connections', { name: 'hooks sftp', ...sftp.body(place) })).id;
  ids.s3 = (await stack.api.data('POST', '/connections', { name: 'hooks s3', ...s3.body(place) })).id;

  // The secret is the one the service generates and shows once.
  const created = await stack.api.call<{ data: { id: string; secret: string } }>('POST', '/webhooks', {
    url: receiver.url(PATH), events: ['transfer.started', 'transfer.completed', 'transfer.failed', 'file.uploaded', 'file.deleted'],
  });
  if (created.status !== 201) throw new Error(`create webhook: ${created.status} ${JSON.stringify(created.body)}`);
  webhookId = created.body.data.id;
  receiver.secrets.set(PATH, created.body.data.secret);
}, 180_000);

afterAll(async () => {
  await stack?.stop();
  await receiver?.stop();
  cert?.remove();
  rmSync(sftpRoot, { recursive: true, force: true });
}, 60_000);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const keyOf = (r: ReceivedRequest) => {
  const body = JSON.parse(r.body.toString('utf8')) as { event: string; data: { id: string } };
  return `${body.event} ${body.data.id}`;
};

/** Events of real operations: a transfer through the agent (started, completed), a cancelled one (failed), an upload and a delete. */
async function produceEvents(label: string): Promise<void> {
  const job = await stack.api.data('POST', '/transfers', {
    name: `hooks ${label}`, sourceConnectionId: ids.sftp, sourcePath: '/src', destinationConnectionId: ids.s3, destinationPath: `/${label}`,
  });
  const done = await stack.api.call('POST', `/transfers/${job.id}/execute`);
  expect(done.body).toMatchObject({ success: true, files_transferred: 3 });
  expected.add(`transfer.started ${job.id}`).add(`transfer.completed ${job.id}`);

  const cancelled = await stack.api.data('POST', '/transfers', {
    name: `hooks ${label} cancelled`, sourceConnectionId: ids.sftp, sourcePath: '/src', destinationConnectionId: ids.s3, destinationPath: `/${label}-c`,
  });
  await stack.api.data('POST', `/transfers/${cancelled.id}/cancel`, undefined, 200);
  expected.add(`transfer.failed ${cancelled.id}`);

  const content = Buffer.from(`uploaded while the receiver was ${label}\n`);
  const uploaded = await uploadFile(stack.url, stack.api.token, { name: `${label}.txt`, path: '/hooks', size: content.length, content: Readable.from([content]) });
  expect(uploaded.status).toBe(201);
  expected.add(`file.uploaded ${uploaded.body.data.id}`);
  const other = await uploadFile(stack.url, stack.api.token, { name: `${label}-gone.txt`, path: '/hooks', size: content.length, content: Readable.from([content]) });
  await stack.api.data('DELETE', `/files/${other.body.data.id}`, undefined, 200);
  expected.add(`file.uploaded ${other.body.data.id}`).add(`file.deleted ${other.body.data.id}`);
}

interface Listed { id: string; event: string; status: string; attempt_log: Array<{ n: number; status_code: number | null; error: string | null }> }

async function listDeliveries(): Promise<Listed[]> {
  const all: Listed[] = [];
  let cursor: string | null = null;
  do {
    const page: { data: Listed[]; next_cursor: string | null } =
      (await stack.api.call('GET', `/webhooks/${webhookId}/deliveries?limit=100${cursor ? `&cursor=${cursor}` : ''}`)).body;
    all.push(...page.data);
    cursor = page.next_cursor;
  } while (cursor);
  return all;
}

test('with the receiver hanging, then down, every event is delivered once it is back; repeats share X-Webhook-Delivery', async () => {
  await produceEvents('up');
  const deadline = Date.now() + 60_000;
  while (new Set(receiver.to(PATH).map(keyOf)).size < expected.size && Date.now() < deadline) await sleep(100);
  expect(new Set(receiver.to(PATH).map(keyOf))).toEqual(expected);

  // Down, first answering nothing (every attempt times out)…
  receiver.answer = () => 'hang';
  await produceEvents('hanging');
  await sleep(3 * TIMEOUT_MS);
  // …then not even accepting connections.
  await receiver.stop();
  await produceEvents('stopped');
  await sleep(5_000);
  const seenWhileDown = receiver.requests.length;

  receiver.answer = () => ({ status: 204 });
  await receiver.restart();
  let listed: Listed[] = [];
  for (const until = Date.now() + 120_000; Date.now() < until; await sleep(250)) {
    listed = await listDeliveries();
    if (listed.length === expected.size && listed.every((d) => d.status === 'delivered')) break;
  }
  expect(listed.filter((d) => d.status !== 'delivered')).toEqual([]);
  expect(listed).toHaveLength(expected.size);

  const got = receiver.to(PATH);
  // Every signature checked, with the secret the service generated.
  expect(got.filter((r) => !r.verified)).toEqual([]);
  // None lost: every event produced arrived at least once.
  expect(new Set(got.map(keyOf))).toEqual(expected);
  // Repeats are identifiable: one X-Webhook-Delivery per event, the same bytes on every repeat.
  const byDelivery = new Map<string, ReceivedRequest[]>();
  for (const r of got) byDelivery.set(String(r.headers['x-webhook-delivery']), [...(byDelivery.get(String(r.headers['x-webhook-delivery'])) ?? []), r]);
  expect(byDelivery.size).toBe(expected.size);
  expect(new Set(listed.map((d) => d.id))).toEqual(new Set(byDelivery.keys()));
  for (const copies of byDelivery.values()) {
    expect(new Set(copies.map(keyOf)).size).toBe(1);
    expect(new Set(copies.map((c) => c.body.toString('base64'))).size).toBe(1);
  }
  // The hanging receiver got requests it never answered: those were sent again.
  expect(seenWhileDown).toBeGreaterThan(expected.size / 3);
  expect([...byDelivery.values()].some((copies) => copies.length > 1)).toBe(true);

  // The deliveries list shows the failed attempts with their errors, then the success.
  const errors = listed.flatMap((d) => d.attempt_log.map((a) => a.error)).filter((e): e is string => e !== null);
  expect(errors.some((e) => e === `timed out after ${TIMEOUT_MS} ms`)).toBe(true);
  expect(errors.some((e) => /ECONNREFUSED/.test(e))).toBe(true);
  for (const d of listed) {
    expect(d.attempt_log.at(-1)).toMatchObject({ status_code: 204, error: null });
    expect(d.attempt_log.map((a) => a.n)).toEqual(d.attempt_log.map((_, i) => i + 1));
  }
}, 300_000);

test('POST /webhooks/:id/test reaches the receiver, signed, and is listed', async () => {
  const result = await stack.api.data('POST', `/webhooks/${webhookId}/test`, undefined, 200);
  expect(result).toMatchObject({ success: true, status_code: 204, error: null });
  const req = receiver.requests.find((r) => r.headers['x-webhook-delivery'] === result.delivery_id);
  expect(req).toMatchObject({ verified: true });
  expect(req!.headers['x-webhook-event']).toBe('webhook.test');
  expect((await listDeliveries()).find((d) => d.id === result.delivery_id)).toMatchObject({ event: 'webhook.test', status: 'delivered' });
}, 60_000);
