import { createHmac } from 'node:crypto';
import { Types } from 'mongoose';
import type { App } from '../src/app.js';
import type { Config } from '../src/config.js';
import { AddressPolicy, type Lookup } from '../src/lib/ssrf-guard.js';
import { sendWebhook, WEBHOOK_USER_AGENT } from '../src/plugins/app/webhooks/sender.js';
import { retryDelayMs } from '../src/plugins/app/webhooks/deliverer.service.js';
import { makeTestCertificate, WebhookReceiver, type TestCertificate } from '../../e2e/src/tools/webhook-receiver.js';
import { auth, buildTestApp, createAccount, expectError, settledDeliveries, type TestAccount } from './helper.js';
import { eventually } from './protocol-client.js';

/**
 * Webhook delivery against a real HTTPS receiver on loopback (opened by the test-only allow-list)
 * and the real database; two app instances share it for the exactly-once test.
 */
const SETTINGS: Config['webhooks'] = { timeoutMs: 700, retryWindowMs: 3_000, backoffBaseMs: 50, backoffMaxMs: 3600_000, pollMs: 50, unsafeAllowedAddresses: ['127.0.0.1/32'] };

let cert: TestCertificate;
let receiver: WebhookReceiver;
let app: App;
let owner: TestAccount;
let seq = 0;

beforeAll(async () => {
  cert = makeTestCertificate({ dns: ['hooks.example.test'], ips: ['127.0.0.1', '127.0.0.2'] });
  receiver = await WebhookReceiver.start(cert);
  app = await buildTestApp({ webhooks: SETTINGS });
  app.webhookDeliverer.transport.ca = cert.cert;
  owner = await createAccount(app);
});
afterAll(async () => {
  await app?.close();
  await receiver?.stop();
  cert?.remove();
});

/** A webhook of `account` on its own receiver path, through the API. */
async function webhook(account: TestAccount, events: string[], answer?: WebhookReceiver['answer'], on: App = app, to: WebhookReceiver = receiver) {
  const path = `/hook-${++seq}`;
  const secret = `whsec_test_${new Types.ObjectId()}`;
  const res = await on.inject({ method: 'POST', url: '/api/v1/webhooks', headers: auth(account.apiKey), payload: { url: to.url(path), events, secret } });
  if (res.statusCode !== 201) throw new Error(`create webhook: ${res.statusCode} ${res.body}`);
  to.secrets.set(path, secret);
  if (answer) {
    const previous = to.answer;
    to.answer = (req) => (req.path === path ? answer(req) : previous(req));
  }
  return { id: res.json().data.id as string, path, secret };
}

const deliveries = (account: TestAccount, webhookId: string, query = '') =>
  app.inject({ method: 'GET', url: `/api/v1/webhooks/${webhookId}/deliveries${query}`, headers: auth(account.apiKey) });
const deliveryDocs = (webhookId: string) => app.db.webhookDeliveries.find({ webhook_id: new Types.ObjectId(webhookId) }).sort({ _id: 1 }).lean();
/** Nothing more can be sent to `hooks` (helper.ts settledDeliveries). */
const settled = (accountId: string, hooks: string[], on: App = app) => settledDeliveries(on, accountId,
  { deliveries: on.db.webhookDeliveries, attempts: on.db.webhookAttempts }, { webhook_id: { $in: hooks.map((id) => new Types.ObjectId(id)) } });

describe('delivery', () => {
  test('the body is {event, timestamp, data} exactly, signed over its raw bytes, with every header', async () => {
    const hook = await webhook(owner, ['transfer.completed']);
    await app.outbox.emit(owner.accountId, 'transfer.completed', { id: 'job-1', files_transferred: 2, bytes_transferred: 20 });
    const [req] = await eventually(async () => receiver.to(hook.path).length === 1 && receiver.to(hook.path), 'the delivery');
    const event = (await app.db.outboxEvents.findOne({ account_id: owner.accountId, type: 'transfer.completed' }).lean())!;
    const [delivery] = await deliveryDocs(hook.id);

    expect(req!.body.toString('utf8')).toBe(JSON.stringify({
      event: 'transfer.completed', timestamp: event.created_at.toISOString(), data: { id: 'job-1', files_transferred: 2, bytes_transferred: 20 },
    }));
    expect(req!.verified).toBe(true);
    expect(req!.headers['x-webhook-signature']).toBe(createHmac('sha256', hook.secret).update(req!.body).digest('hex'));
    expect(req!.headers).toMatchObject({
      'content-type': 'application/json', 'user-agent': WEBHOOK_USER_AGENT, 'x-webhook-event': 'transfer.completed', 'x-webhook-delivery': String(delivery!._id),
    });
    expect(WEBHOOK_USER_AGENT).toMatch(/^xfer-webhooks\/\d+\.\d+\.\d+/);
    const ts = Number(req!.headers['x-webhook-timestamp']);
    expect(Math.abs(ts - Date.now() / 1000)).toBeLessThan(30);
    expect(req!.headers['x-webhook-signature-timestamped'])
      .toBe(createHmac('sha256', hook.secret).update(`${String(delivery!._id)}.${ts}.`).update(req!.body).digest('hex'));

    const listed = await eventually(async () => {
      const body = (await deliveries(owner, hook.id)).json();
      return body.data[0]?.status === 'delivered' && body;
    }, 'delivered in the list');
    expect(listed.data).toEqual([{
      id: String(delivery!._id), event: 'transfer.completed', event_id: String(event._id), status: 'delivered', attempts: 1, next_attempt_at: null,
      created_at: expect.any(String), delivered_at: expect.any(String),
      attempt_log: [{ n: 1, at: expect.any(String), status_code: 204, duration_ms: expect.any(Number), error: null }],
    }]);
    expect((await app.db.outboxEvents.findById(event._id).lean())!.status).toBe('done');
  });

  test('500s and a timeout are retried with the same delivery id and body; every attempt is recorded', async () => {
    let n = 0;
    const hook = await webhook(owner, ['transfer.failed'], () => (++n <= 2 ? { status: 500 } : n === 3 ? 'hang' : { status: 200 }));
    await app.outbox.emit(owner.accountId, 'transfer.failed', { id: 'job-2', status: 'failed', error: 'boom' });
    const [delivery] = await eventually(async () => {
      const docs = await deliveryDocs(hook.id);
      return docs[0]?.status === 'delivered' && docs;
    }, 'delivered after retries');
    const got = receiver.to(hook.path);
    expect(got).toHaveLength(4);
    expect(new Set(got.map((r) => r.headers['x-webhook-delivery']))).toEqual(new Set([String(delivery!._id)]));
    expect(new Set(got.map((r) => r.body.toString()))).toEqual(new Set([delivery!.payload]));
    expect(got.every((r) => r.verified)).toBe(true);

    const listed = (await deliveries(owner, hook.id)).json().data[0];
    expect(listed.attempt_log.map((a: { n: number; status_code: number | null; error: string | null }) => [a.n, a.status_code, a.error])).toEqual([
      [1, 500, 'HTTP 500'], [2, 500, 'HTTP 500'], [3, null, `timed out after ${SETTINGS.timeoutMs} ms`], [4, 200, null],
    ]);
    expect(listed.attempt_log[2].duration_ms).toBeGreaterThanOrEqual(SETTINGS.timeoutMs - 5);
  });

  test('backoff: full jitter below base × 2^(n-1), capped at an hour', () => {
    expect(retryDelayMs(1, 30_000, undefined, () => 0.999)).toBeCloseTo(29_970);
    expect(retryDelayMs(4, 30_000, undefined, () => 0.5)).toBe(120_000);
    expect(retryDelayMs(3, 30_000, undefined, () => 0)).toBe(0);
    expect(retryDelayMs(40, 30_000, undefined, () => 1)).toBe(3600_000);
    expect(retryDelayMs(40, 30_000, 120_000, () => 1)).toBe(120_000);
  });

  test('a redirect is not followed: the attempt fails and the Location is never requested', async () => {
    const hook = await webhook(owner, ['transfer.started'], () => ({ status: 302, headers: { location: receiver.url('/elsewhere') } }));
    const res = await app.inject({ method: 'POST', url: `/api/v1/webhooks/${hook.id}/test`, headers: auth(owner.apiKey) });
    expect(res.statusCode).toBe(200);
    expect(res.json().data).toMatchObject({ success: false, status_code: 302, error: 'redirects are not followed (HTTP 302)' });
    await settled(owner.accountId, [hook.id]);
    expect(receiver.to('/elsewhere')).toHaveLength(0);
  });

  test('only subscribed event types are delivered; other accounts never see them', async () => {
    const stranger = await createAccount(app);
    const mine = await webhook(owner, ['transfer.completed']);
    const theirs = await webhook(stranger, ['transfer.started', 'transfer.completed']);
    await app.outbox.emit(owner.accountId, 'transfer.started', { id: 'job-3' });
    await app.outbox.emit(owner.accountId, 'transfer.completed', { id: 'job-3', files_transferred: 0, bytes_transferred: 0 });
    await eventually(async () => (await app.db.outboxEvents.countDocuments({ account_id: owner.accountId, status: 'pending' })) === 0, 'fan-out done');
    await eventually(async () => receiver.to(mine.path).length === 1, 'the subscribed event');
    await settled(owner.accountId, [mine.id]);
    await settled(stranger.accountId, [theirs.id]);
    expect(receiver.to(mine.path).map((r) => r.headers['x-webhook-event'])).toEqual(['transfer.completed']);
    expect(receiver.to(theirs.path)).toHaveLength(0);
    expect(await app.db.webhookDeliveries.countDocuments({ webhook_id: new Types.ObjectId(theirs.id) })).toBe(0);

    expectError(await deliveries(stranger, mine.id), 404, `Webhook ${mine.id} not found`);
    expectError(await app.inject({ method: 'POST', url: `/api/v1/webhooks/${mine.id}/test`, headers: auth(stranger.apiKey) }), 404);
    expect((await deliveries(stranger, theirs.id)).json().data).toEqual([]);
  });

  test('a deleted webhook and a deactivated one stop: their pending deliveries are cancelled, not sent', async () => {
    const deleted = await webhook(owner, ['transfer.started'], () => ({ status: 503 }));
    const paused = await webhook(owner, ['transfer.started'], () => ({ status: 503 }));
    await app.outbox.emit(owner.accountId, 'transfer.started', { id: 'job-4' });
    await eventually(async () => receiver.to(deleted.path).length >= 1 && receiver.to(paused.path).length >= 1, 'first attempts');
    await app.inject({ method: 'DELETE', url: `/api/v1/webhooks/${deleted.id}`, headers: auth(owner.apiKey) });
    await app.inject({ method: 'PUT', url: `/api/v1/webhooks/${paused.id}`, headers: auth(owner.apiKey), payload: { active: false } });
    for (const hook of [deleted, paused]) {
      await eventually(async () => (await deliveryDocs(hook.id))[0]?.status === 'cancelled', 'cancelled');
    }
    const sent = [receiver.to(deleted.path).length, receiver.to(paused.path).length];
    await settled(owner.accountId, [deleted.id, paused.id]);
    expect([receiver.to(deleted.path).length, receiver.to(paused.path).length]).toEqual(sent);
    expect((await deliveries(owner, paused.id, '?status=cancelled')).json().data).toHaveLength(1);
    expect((await deliveries(owner, paused.id, '?status=delivered')).json().data).toHaveLength(0);
    expectError(await deliveries(owner, paused.id, '?status=lost'), 400, 'querystring.status must be one of: pending, delivered, failed, cancelled');
  });

  test('failed once the retry window has passed; no attempt starts after it', async () => {
    const hook = await webhook(owner, ['transfer.started'], () => 'drop');
    await app.outbox.emit(owner.accountId, 'transfer.started', { id: 'job-5' });
    const [delivery] = await eventually(async () => {
      const docs = await deliveryDocs(hook.id);
      return docs[0]?.status === 'failed' && docs;
    }, 'failed');
    // The delivery's outcome is written just before its attempt's.
    const attempts = await eventually(async () => {
      const all = await app.db.webhookAttempts.find({ delivery_id: delivery!._id }).sort({ n: 1 }).lean();
      return all.every((a) => a.finished_at) && all;
    }, 'every attempt finished');
    expect(attempts.length).toBeGreaterThan(2);
    expect(attempts.every((a) => a.error)).toBe(true);
    expect(attempts.at(-1)!.started_at.getTime()).toBeLessThanOrEqual(delivery!.first_attempt_at!.getTime() + SETTINGS.retryWindowMs);
    expect(delivery!.next_attempt_at).toBeNull();
    const listed = (await deliveries(owner, hook.id, '?status=failed')).json().data;
    expect(listed).toHaveLength(1);
    expect(listed[0].attempt_log[0].error).toMatch(/socket hang up|ECONNRESET/);
  }, 30_000);
});

describe('fair per account', () => {
  test("one account's hanging receiver and backlog do not delay another account's delivery", async () => {
    const backlog = 30;
    const slowAccount = await createAccount(app);
    const otherAccount = await createAccount(app);
    // Each account has a receiver of its own; the slow one answers only after the sender's timeout: never.
    const slowReceiver = await WebhookReceiver.start(cert);
    const slow = await webhook(slowAccount, ['transfer.started'], () => 'hang', app, slowReceiver);
    const prompt = await webhook(otherAccount, ['transfer.started']);
    for (let i = 0; i < backlog; i++) await app.outbox.emit(slowAccount.accountId, 'transfer.started', { id: `slow-${i}` });
    await app.outbox.emit(otherAccount.accountId, 'transfer.started', { id: 'prompt' });

    const [arrived] = await eventually(async () => receiver.to(prompt.path).length === 1 && receiver.to(prompt.path), "the other account's delivery");
    // Ordering, not time: when the other account's event arrived, the slow account had been sent
    // only its fair share (two per instance, plus at most one more round after a timeout), while
    // nearly all of its backlog was still waiting. Without the share it went out after the backlog.
    const slowBefore = slowReceiver.to(slow.path).filter((r) => r.at <= arrived!.at).length;
    expect(slowBefore).toBeLessThanOrEqual(4);
    const waiting = await app.db.webhookDeliveries.countDocuments({ webhook_id: new Types.ObjectId(slow.id), status: 'pending', attempts: 0 });
    expect(waiting).toBeGreaterThanOrEqual(backlog - 4);
    expect(arrived!.verified).toBe(true);
    // The slow account still gets its share while the other's delivery is done.
    await eventually(async () => (await deliveryDocs(prompt.id))[0]?.status === 'delivered', 'delivered');
    await eventually(async () => slowReceiver.to(slow.path).length > slowBefore, 'the slow account keeps being served');
    // Stop the backlog: its pending deliveries are cancelled rather than sent.
    await app.inject({ method: 'DELETE', url: `/api/v1/webhooks/${slow.id}`, headers: auth(slowAccount.apiKey) });
    await slowReceiver.stop();
  });
});

describe('crashes', () => {
  test('an attempt whose instance died is taken over once its lease ends, and marked abandoned', async () => {
    const hook = await webhook(owner, ['transfer.started']);
    const now = Date.now();
    // What a dead instance leaves: attempt 1 claimed, never finished, its lease running out.
    const delivery = await app.db.webhookDeliveries.create({
      account_id: owner.accountId, webhook_id: hook.id, event_id: new Types.ObjectId(), event: 'transfer.started',
      payload: JSON.stringify({ event: 'transfer.started', timestamp: new Date(now).toISOString(), data: { id: 'job-6' } }),
      attempts: 1, next_attempt_at: new Date(now + 500), first_attempt_at: new Date(now),
    });
    await app.db.webhookAttempts.create({
      account_id: owner.accountId, delivery_id: delivery._id, n: 1, instance_id: 'dead', started_at: new Date(now), lease_expires_at: new Date(now + 500),
    });
    await eventually(async () => (await app.db.webhookDeliveries.findById(delivery._id).lean())!.status === 'delivered', 'taken over');
    await settled(owner.accountId, [hook.id]);
    // Nothing was sent while the dead instance's lease ran (the receiver notes when each request arrived).
    expect(receiver.to(hook.path)).toHaveLength(1);
    expect(receiver.to(hook.path)[0]!.headers['x-webhook-delivery']).toBe(String(delivery._id));
    expect(receiver.to(hook.path)[0]!.at).toBeGreaterThanOrEqual(now + 500);
    const listed = (await deliveries(owner, hook.id)).json().data[0];
    expect(listed.attempt_log.map((a: { n: number; status_code: number | null; error: string | null }) => [a.n, a.status_code, a.error])).toEqual([
      [1, null, 'abandoned: the instance sending it stopped before recording an outcome'], [2, 204, null],
    ]);
  });

  test('a fan-out that ran before a crash (event still pending) creates no second delivery', async () => {
    const hook = await webhook(owner, ['file.shared']);
    const event = await app.db.outboxEvents.create({ account_id: owner.accountId, type: 'file.shared', data: { id: 'f-1' }, status: 'done' });
    await app.db.webhookDeliveries.create({
      account_id: owner.accountId, webhook_id: hook.id, event_id: event._id, event: 'file.shared',
      payload: JSON.stringify({ event: 'file.shared', timestamp: event.created_at.toISOString(), data: { id: 'f-1' } }), next_attempt_at: new Date(),
    });
    await app.db.outboxEvents.updateOne({ _id: event._id }, { $set: { status: 'pending' } });
    await eventually(async () => (await app.db.outboxEvents.findById(event._id).lean())!.status === 'done', 'fan-out again');
    await eventually(async () => receiver.to(hook.path).length === 1, 'delivered');
    await settled(owner.accountId, [hook.id]);
    expect(receiver.to(hook.path)).toHaveLength(1);
    expect(await app.db.webhookDeliveries.countDocuments({ event_id: event._id })).toBe(1);
  });
});

describe('POST /webhooks/:id/test', () => {
  test('sends webhook.test now, once, recorded like any delivery', async () => {
    const hook = await webhook(owner, ['file.uploaded']);
    const res = await app.inject({ method: 'POST', url: `/api/v1/webhooks/${hook.id}/test`, headers: auth(owner.apiKey) });
    expect(res.statusCode).toBe(200);
    const result = res.json().data;
    expect(result).toEqual({ success: true, status_code: 204, duration_ms: expect.any(Number), error: null, delivery_id: expect.any(String) });
    const [req] = receiver.to(hook.path);
    expect(req!.verified).toBe(true);
    expect(req!.headers['x-webhook-delivery']).toBe(result.delivery_id);
    expect(JSON.parse(req!.body.toString())).toMatchObject({ event: 'webhook.test', data: { webhook_id: hook.id, message: expect.any(String) } });
    expect((await deliveries(owner, hook.id)).json().data[0]).toMatchObject({ id: result.delivery_id, event: 'webhook.test', status: 'delivered', attempts: 1 });
  });

  test('a failing receiver: 200 with success false, the delivery failed after one attempt, never retried', async () => {
    const hook = await webhook(owner, ['file.uploaded'], () => ({ status: 500 }));
    const res = await app.inject({ method: 'POST', url: `/api/v1/webhooks/${hook.id}/test`, headers: auth(owner.apiKey) });
    expect(res.json().data).toMatchObject({ success: false, status_code: 500, error: 'HTTP 500' });
    await settled(owner.accountId, [hook.id]);
    expect(receiver.to(hook.path)).toHaveLength(1);
    expect((await deliveries(owner, hook.id)).json().data[0]).toMatchObject({ status: 'failed', attempts: 1, next_attempt_at: null });
  });
});

describe('two instances on one database', () => {
  // A database of their own, and a timeout long enough that no attempt is retried for being slow
  // under load: every extra request here would be a double send, not a retry.
  const settings = { ...SETTINGS, timeoutMs: 10_000 };
  let a: App;
  let b: App;
  let account: TestAccount;
  beforeAll(async () => {
    a = await buildTestApp({ webhooks: settings });
    b = await buildTestApp({ webhooks: settings, databaseName: a.config.databaseName, masterKeys: a.config.masterKeys });
    for (const instance of [a, b]) instance.webhookDeliverer.transport.ca = cert.cert;
    account = await createAccount(a);
  });
  afterAll(async () => {
    await b?.close();
    await a?.close();
  });

  test('every event is delivered exactly once per webhook, in one attempt', async () => {
    const hooks = [await webhook(account, ['file.deleted'], undefined, a), await webhook(account, ['file.deleted'], undefined, a)];
    const EVENTS = 30;
    await Promise.all(Array.from({ length: EVENTS }, (_, i) => (i % 2 ? a : b).outbox.emit(account.accountId, 'file.deleted', { id: `f-${i}` })));
    // What is tested is once, not speed: 60 deliveries take seconds, and more on a loaded CI machine.
    await eventually(async () => hooks.every((h) => receiver.to(h.path).length >= EVENTS), 'every event at both webhooks', 60_000).catch(async (err: Error) => {
      // What was stuck, instead of the bare timeout (seen once in CI).
      const outbox = await a.db.outboxEvents.find({ account_id: new Types.ObjectId(account.accountId) }, { status: 1 }).lean();
      const deliveries = await a.db.webhookDeliveries.find({ webhook_id: { $in: hooks.map((h) => new Types.ObjectId(h.id)) } }, { status: 1, attempts: 1 }).lean();
      const count = <T>(list: T[], key: (x: T) => unknown) => JSON.stringify(list.reduce<Record<string, number>>((m, x) => ({ ...m, [String(key(x))]: (m[String(key(x))] ?? 0) + 1 }), {}));
      throw new Error(`${err.message}: received ${hooks.map((h) => receiver.to(h.path).length).join(' and ')} of ${EVENTS}; outbox ${count(outbox, (e) => e.status)}; deliveries ${count(deliveries, (d) => `${d.status}/${d.attempts}`)}`);
    });
    await settled(account.accountId, hooks.map((h) => h.id), a);
    for (const hook of hooks) {
      const got = receiver.to(hook.path);
      expect(got).toHaveLength(EVENTS);
      expect(new Set(got.map((r) => JSON.parse(r.body.toString()).data.id)).size).toBe(EVENTS);
      expect(new Set(got.map((r) => r.headers['x-webhook-delivery'])).size).toBe(EVENTS);
      expect(got.every((r) => r.verified)).toBe(true);
    }
    expect(await a.db.webhookAttempts.countDocuments()).toBe(2 * EVENTS);
    const byInstance = await a.db.webhookAttempts.aggregate<{ _id: string }>([{ $group: { _id: '$instance_id' } }]);
    // Both instances sent some (otherwise this would prove nothing about racing them).
    expect(byInstance).toHaveLength(2);
  }, 90_000);
});

describe('the sender connects only to the address it checked', () => {
  let second: WebhookReceiver;
  beforeAll(async () => {
    // Same port as the first receiver: a second lookup of the name would reach this one.
    second = await WebhookReceiver.start(cert, '127.0.0.2', receiver.port);
  });
  afterAll(() => second?.stop());

  const send = (url: string, lookup: Lookup, ca: string | null = cert.cert) => sendWebhook(
    { url, secret: 'whsec_x', event: 'webhook.test', deliveryId: 'd1', body: '{}' },
    { policy: new AddressPolicy(['127.0.0.1/32']), timeoutMs: 2_000, lookup, ca: ca ?? undefined },
  );

  test('a name whose lookup changes after the check still reaches the checked address only', async () => {
    const calls: string[] = [];
    const flipping: Lookup = async (name) => {
      calls.push(name);
      return [{ address: calls.length === 1 ? '127.0.0.1' : '127.0.0.2', family: 4 }];
    };
    const before = receiver.to('/rebind').length;
    const result = await send(`https://hooks.example.test:${receiver.port}/rebind`, flipping);
    expect(result).toMatchObject({ ok: true, statusCode: 204, error: null });
    expect(calls).toEqual(['hooks.example.test']);
    expect(receiver.to('/rebind')).toHaveLength(before + 1);
    expect(second.to('/rebind')).toHaveLength(0);
    // The next attempt looks up again, gets the refused address, and sends nothing.
    const refused = await send(`https://hooks.example.test:${receiver.port}/rebind`, flipping);
    expect(refused.ok).toBe(false);
    expect(refused.error).toMatch(/^refused: url host hooks\.example\.test resolves to a refused address: 127\.0\.0\.2 is a loopback address/);
    expect(receiver.to('/rebind')).toHaveLength(before + 1);
  });

  test('certificates are checked against the URL name (SNI), and an unknown CA is refused', async () => {
    const to127: Lookup = async () => [{ address: '127.0.0.1', family: 4 }];
    expect((await send(`https://other.example.test:${receiver.port}/x`, to127)).error).toMatch(/altnames|Hostname/i);
    expect((await send(`https://hooks.example.test:${receiver.port}/x`, to127, null)).error).toMatch(/self[- ]signed/i);
  });
});
