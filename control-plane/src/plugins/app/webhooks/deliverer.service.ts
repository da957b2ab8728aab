import type { FastifyBaseLogger } from 'fastify';
import { randomUUID } from 'node:crypto';
import { Types } from 'mongoose';
import { backoffDelayMs, type WebhookTestResult } from '@xfer/shared';
import { Loop } from '../../../lib/loop.js';
import type { AddressPolicy, Lookup } from '../../../lib/ssrf-guard.js';
import type { Models } from '../../../models/index.js';
import type { WebhookDoc } from '../../../models/webhook.model.js';
import type { OutboxEventDoc } from '../../../models/outbox-event.model.js';
import { sendWebhook, webhookBody, type SendResult } from './sender.js';
import type { WebhooksService } from './webhooks.service.js';
import type { MetricsService } from '../metrics/index.js';
import { isDuplicateKey } from '../../../lib/duplicate-key.js';
import { claimAttempt, finishAttempt, retryAt, type AttemptStore, type Claim } from '../../../lib/attempt-claim.js';

/** TLS trust and name resolution of outgoing deliveries: the system's unless replaced (tests). */
export interface WebhookTransport {
  ca?: string | Buffer;
  lookup?: Lookup;
}

/** What routes and tests use of the deliverer (`app.webhookDeliverer`). */
export interface WebhookDeliverer {
  /**
   * Sends a `webhook.test` event to one of the account's webhooks now: one attempt, recorded
   * like any delivery and never retried. Null when the account has no such webhook.
   */
  sendTest(accountId: string, webhookId: Types.ObjectId): Promise<WebhookTestResult | null>;
  /** Replaceable by tests before deliveries start (a self-signed receiver, an injected resolver). */
  readonly transport: WebhookTransport;
  /**
   * Adds a consumer of every outbox event (the notifications domain): the fan-out calls each,
   * in the order added, before it marks the event done. A consumer must be idempotent (the
   * fan-out may run twice: two instances, a crash) and throw to leave the event pending for the
   * next tick. Added while the app is built, before the loop starts.
   */
  onFanOut(consumer: OutboxConsumer): void;
}

/** Something else made of each outbox event (WebhookDeliverer.onFanOut). */
export type OutboxConsumer = (event: OutboxEventDoc & { _id: Types.ObjectId }) => Promise<void>;

/** What the deliverer needs, passed in so that it reads no globals (deliverer.plugin.ts). */
export interface WebhookDelivererOptions {
  db: Models;
  /** Opens the signing secret of a webhook, only when an attempt is sent. */
  webhooks: Pick<WebhooksService, 'openSecret'>;
  log: FastifyBaseLogger;
  /** Counts each attempt's outcome. */
  metrics: Pick<MetricsService, 'webhookAttempt'>;
  /** The addresses a webhook URL may resolve to (config.webhooks.unsafeAllowedAddresses). */
  policy: AddressPolicy;
  /** Per-attempt timeout (config.webhooks.timeoutMs); the lease of an attempt follows from it. */
  timeoutMs: number;
  /** How long a delivery is retried before it is marked failed (config.webhooks.retryWindowMs). */
  retryWindowMs: number;
  /** First backoff delay and longest wait (config.webhooks.backoffBaseMs, backoffMaxMs). */
  backoffBaseMs: number;
  backoffMaxMs: number;
  /** How often the loop looks for due work (config.webhooks.pollMs). */
  pollMs: number;
  /** Defaults to the system's trust store and resolver. */
  transport?: WebhookTransport;
}

const HOUR_MS = 3600_000;
const FANOUT_BATCH = 100;
const ATTEMPT_BATCH = 50;
/** Attempts in flight at once per instance. */
const PARALLEL_SENDS = 8;
/**
 * Attempts of one account in flight at once per instance: a tenant whose receiver hangs until
 * the timeout, with any backlog, holds at most this many of the PARALLEL_SENDS slots; the rest
 * stay free for every other account.
 */
const PER_ACCOUNT_SENDS = 2;
const TEST_MESSAGE = 'This is a test event from xfer.';

/**
 * Wait after failed attempt `n` (1-based): exponential backoff with full jitter, uniformly
 * between 0 and base × 2^(n-1), that bound capped at `maxMs` (an hour by default). The jitter
 * spreads the retries of many deliveries that failed together (a receiver coming back) instead
 * of bunching them.
 */
export function retryDelayMs(n: number, baseMs: number, maxMs = HOUR_MS, random: () => number = Math.random): number {
  return backoffDelayMs(n - 1, baseMs, maxMs, random);
}

type Delivery = { _id: Types.ObjectId; account_id: Types.ObjectId; webhook_id: Types.ObjectId; event: string; payload: string };
type Target = Pick<WebhookDoc, 'url' | 'secret' | 'account_id'> & { _id: unknown };

/**
 * Delivers outbox events to webhooks, at least once, from every instance side by side
 * (docs/api.md "Webhook delivery", docs/architecture.md). Each tick:
 * 1. fan-out: every pending outbox event becomes one delivery per active webhook of its account
 *    subscribed to its type (unique (event_id, webhook_id): running twice creates nothing twice),
 *    then the event is marked done;
 * 2. attempts: each due delivery is claimed by inserting its next attempt number (unique
 *    (delivery_id, n): one instance wins; lib/attempt-claim.ts), sent, and given its outcome: delivered, or retried
 *    after an exponential, fully jittered backoff until the retry window ends, then failed.
 * A claimed attempt has a lease: when its instance stops before recording an outcome, the next
 * attempt may be claimed once the lease ends.
 */
export class WebhookDelivererService implements WebhookDeliverer {
  readonly transport: WebhookTransport;
  private readonly instanceId = randomUUID();
  /** Long enough for the slowest attempt (its timeout bounds it) and the writes around it. */
  private readonly leaseMs: number;
  private readonly loop: Loop;
  /** Attempts running on this instance: per account (for the fair share) and per delivery. */
  private readonly perAccount = new Map<string, number>();
  private readonly sending = new Set<string>();
  private readonly running = new Set<Promise<void>>();
  private readonly consumers: OutboxConsumer[] = [];
  private readonly store: AttemptStore;

  constructor(private readonly o: WebhookDelivererOptions) {
    this.transport = o.transport ?? {};
    this.store = { deliveries: o.db.webhookDeliveries, attempts: o.db.webhookAttempts };
    this.leaseMs = 2 * o.timeoutMs + 5_000;
    this.loop = new Loop(() => this.tick(), o.pollMs, (err) => o.log.warn({ err }, 'webhook delivery loop failed'));
  }

  onFanOut(consumer: OutboxConsumer): void {
    this.consumers.push(consumer);
  }

  /** When the app is ready: the loop starts. */
  start(): void {
    this.loop.start();
  }

  /** When the app closes: the loop stops first, then the attempts in flight are waited for. */
  async stop(): Promise<void> {
    await this.loop.stop();
    await Promise.all(this.running);
  }

  /** One attempt now, recorded like a delivery and never retried (WebhookDeliverer.sendTest). */
  async sendTest(accountId: string, webhookId: Types.ObjectId): Promise<WebhookTestResult | null> {
    const { db } = this.o;
    const webhook = await db.webhooks.findOne({ _id: webhookId, account_id: accountId }).lean();
    if (!webhook) return null;
    const now = new Date();
    const leaseEnd = new Date(now.getTime() + this.leaseMs);
    // Created already claimed (attempt 1, not due before its lease ends), so no loop races for it.
    const delivery = await db.webhookDeliveries.create({
      account_id: webhook.account_id, webhook_id: webhook._id, event_id: new Types.ObjectId(), event: 'webhook.test',
      payload: webhookBody('webhook.test', now, { webhook_id: String(webhook._id), message: TEST_MESSAGE }),
      attempts: 1, next_attempt_at: leaseEnd, first_attempt_at: now,
    });
    const attemptDoc = await db.webhookAttempts.create({
      account_id: webhook.account_id, delivery_id: delivery._id, n: 1, instance_id: this.instanceId, started_at: now, lease_expires_at: leaseEnd,
    });
    const result = await this.send(webhook, delivery);
    await this.record(delivery, { attemptId: attemptDoc._id, n: 1, firstAttemptAt: now }, result, false);
    return { success: result.ok, status_code: result.statusCode, duration_ms: result.durationMs, error: result.error, delivery_id: String(delivery._id) };
  }

  private async tick(): Promise<void> {
    try {
      await this.fanOut();
    } catch (err) {
      this.o.log.warn({ err }, 'webhook fan-out failed; retrying on the next tick');
    }
    await this.attemptDue();
  }

  private async fanOut(): Promise<void> {
    const { db } = this.o;
    const events = await db.outboxEvents.find({ status: 'pending' }).sort({ _id: 1 }).limit(FANOUT_BATCH).lean();
    for (const event of events) {
      // Only webhooks that existed when the event happened: one created since (before this pass
      // reached the event) did not subscribe to what came before it.
      const hooks = await db.webhooks.find({ account_id: event.account_id, active: true, events: event.type, created_at: { $lte: event.created_at } }, { _id: 1 }).lean();
      const payload = webhookBody(event.type, event.created_at, event.data as Record<string, unknown>);
      for (const hook of hooks) {
        try {
          await db.webhookDeliveries.create({
            account_id: event.account_id, webhook_id: hook._id, event_id: event._id, event: event.type, payload, next_attempt_at: new Date(),
          });
        } catch (err) {
          // Made already by another instance, or by this one before a crash.
          if (!isDuplicateKey(err)) throw err;
        }
      }
      for (const consume of this.consumers) await consume(event);
      await db.outboxEvents.updateOne({ _id: event._id, status: 'pending' }, { $set: { status: 'done' } });
    }
  }

  /**
   * Fills the free slots fairly: due deliveries, oldest first, at most PER_ACCOUNT_SENDS per
   * account in flight. Each round leaves out the accounts already at their share (and the
   * deliveries already being sent), so a backlog of one account never hides another's work.
   */
  private async attemptDue(): Promise<void> {
    const { perAccount, sending } = this;
    while (sending.size < PARALLEL_SENDS) {
      const atShare = [...perAccount].filter(([, n]) => n >= PER_ACCOUNT_SENDS).map(([a]) => new Types.ObjectId(a));
      const due = await this.o.db.webhookDeliveries.find({
        status: 'pending', next_attempt_at: { $lte: new Date() },
        account_id: { $nin: atShare }, _id: { $nin: [...sending].map((id) => new Types.ObjectId(id)) },
      }).sort({ next_attempt_at: 1 }).limit(ATTEMPT_BATCH).lean();
      let started = 0;
      for (const delivery of due) {
        if (sending.size >= PARALLEL_SENDS) break;
        if ((perAccount.get(String(delivery.account_id)) ?? 0) >= PER_ACCOUNT_SENDS) continue;
        this.launch(delivery);
        started++;
      }
      if (started === 0) return;
    }
  }

  /** Starts an attempt without waiting for it: a hanging receiver holds its slot, not the loop. */
  private launch(delivery: Delivery): void {
    const { perAccount, sending, running } = this;
    const account = String(delivery.account_id);
    const id = String(delivery._id);
    perAccount.set(account, (perAccount.get(account) ?? 0) + 1);
    sending.add(id);
    const run = this.attempt(delivery)
      .catch((err: unknown) => this.o.log.warn({ err, deliveryId: id }, 'webhook attempt could not be recorded; retrying on a later tick'))
      .finally(() => {
        sending.delete(id);
        const left = perAccount.get(account)! - 1;
        if (left > 0) perAccount.set(account, left);
        else perAccount.delete(account);
        running.delete(run);
        // A slot is free: look for due work now rather than at the next interval.
        this.loop.wake();
      });
    running.add(run);
  }

  private async attempt(delivery: Delivery): Promise<void> {
    const webhook = await this.o.db.webhooks.findOne({ _id: delivery.webhook_id, account_id: delivery.account_id }).lean();
    if (!webhook || !webhook.active) {
      // Deleted or deactivated: what it had pending is never sent.
      await this.o.db.webhookDeliveries.updateOne({ _id: delivery._id, status: 'pending' }, { $set: { status: 'cancelled', next_attempt_at: null } });
      return;
    }
    const claimed = await claimAttempt(this.store, delivery, this.instanceId, this.leaseMs);
    if (!claimed) return;
    const result = await this.send(webhook, delivery);
    if (!result.ok) this.o.log.info({ deliveryId: String(delivery._id), webhookId: String(webhook._id), attempt: claimed.n, error: result.error }, 'webhook attempt failed');
    await this.record(delivery, claimed, result, true);
  }

  /** Opens the secret and sends; a secret that cannot be opened is a failed attempt, not a crash. */
  private async send(webhook: Target, delivery: Delivery): Promise<SendResult> {
    let secret: string;
    try {
      secret = this.o.webhooks.openSecret(webhook);
    } catch (err) {
      this.o.log.error({ err, deliveryId: String(delivery._id) }, 'webhook secret could not be opened');
      return { ok: false, statusCode: null, durationMs: 0, error: 'the signing secret could not be opened (master key missing?)' };
    }
    return sendWebhook(
      { url: webhook.url, secret, event: delivery.event, deliveryId: String(delivery._id), body: delivery.payload },
      { policy: this.o.policy, timeoutMs: this.o.timeoutMs, lookup: this.transport.lookup, ca: this.transport.ca },
    );
  }

  /** Records the outcome (lib/attempt-claim.ts `finishAttempt`): delivered, retried after a backoff within the window, or failed. */
  private async record(delivery: Delivery, claimed: Claim, result: SendResult, retry: boolean): Promise<void> {
    let update: Record<string, unknown>;
    if (result.ok) update = { status: 'delivered', delivered_at: new Date(), next_attempt_at: null };
    else {
      const next = retry ? retryAt(claimed, retryDelayMs(claimed.n, this.o.backoffBaseMs, this.o.backoffMaxMs), this.o.retryWindowMs) : null;
      update = next ? { status: 'pending', next_attempt_at: next } : { status: 'failed', next_attempt_at: null };
    }
    this.o.metrics.webhookAttempt(result.ok ? 'delivered' : update.status === 'pending' ? 'retrying' : 'failed');
    await finishAttempt(this.store, delivery._id, claimed, { status_code: result.statusCode, duration_ms: result.durationMs, error: result.error }, update);
  }
}
