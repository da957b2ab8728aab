import type { FastifyBaseLogger } from 'fastify';
import { randomUUID } from 'node:crypto';
import { Types } from 'mongoose';
import { backoffDelayMs, type NotificationTestResult } from '@xfer/shared';
import { Loop } from '../../../lib/loop.js';
import type { AddressPolicy } from '../../../lib/ssrf-guard.js';
import type { Models } from '../../../models/index.js';
import type { OutboxEventDoc } from '../../../models/outbox-event.model.js';
import type { NotificationDeliveryDoc } from '../../../models/notification-delivery.model.js';
import { claimAttempt, finishAttempt, retryAt, type AttemptStore, type Claim } from '../../../lib/attempt-claim.js';
import { isDuplicateKey } from '../../../lib/duplicate-key.js';
import { BadRequestError } from '../../../errors.js';
import { sendMail, type MailResult, type MailTransport } from './mailer.js';
import { renderEmail, subjectLine } from './message.js';
import { Digests } from './digests.js';
import type { NotificationsService, StoredNotificationSettings } from './notifications.service.js';

/** An email to queue outside the subscription list (a workflow's notify step with channel email). */
export interface QueuedEmail {
  /** Makes the call idempotent: a second call with the same id queues nothing. */
  eventId: Types.ObjectId;
  /** What the log names it (e.g. `workflow.notify`). */
  event: string;
  subject: string;
  text: string;
}

/** What routes and other domains use of the deliverer (`app.notificationDeliverer`). */
export interface NotificationDeliverer {
  /**
   * Sends a `notification.test` message now with the stored settings: one attempt, recorded in the
   * log and never retried. 400 when email is not configured (server, sender, recipients).
   */
  sendTest(accountId: string): Promise<NotificationTestResult>;
  /**
   * Queues one email to the account's recipients, sent from the outbox loop with retries like an
   * event's. Resolves with the log id, or null when the account's email notifications are off.
   */
  queueEmail(accountId: string | Types.ObjectId, email: QueuedEmail): Promise<string | null>;
  /** Replaceable by tests before deliveries start (a self-signed server's CA, a resolver). */
  readonly transport: MailTransport;
}

export interface NotificationDelivererOptions {
  db: Models;
  notifications: Pick<NotificationsService, 'stored' | 'smtpOf'>;
  log: FastifyBaseLogger;
  /** The addresses an SMTP server may be at (config.notifications.unsafeAllowedAddresses). */
  policy: AddressPolicy;
  /** config.notifications: per-attempt timeout, retry window, first and longest backoff, poll interval. */
  timeoutMs: number;
  retryWindowMs: number;
  backoffBaseMs: number;
  backoffMaxMs: number;
  pollMs: number;
  transport?: MailTransport;
}

const ATTEMPT_BATCH = 20;
/** Messages in flight at once per instance: an SMTP server that hangs holds one slot until its timeout. */
const PARALLEL_SENDS = 4;
const TEST_TEXT = 'This is a test message from xfer: the notification settings of this account work.';

type Delivery = NotificationDeliveryDoc & { _id: Types.ObjectId };
type OutboxEvent = OutboxEventDoc & { _id: Types.ObjectId };

/**
 * Sends notification emails (docs/api.md "Notifications", docs/architecture.md "Notifications").
 * - fan-out: the webhook deliverer's fan-out calls `fanOut` with every outbox event before marking
 *   it done; an event whose type the account selected becomes one notification (unique event_id:
 *   running twice creates it once), rendered then, addressed to the recipients set then — or, with
 *   `digest: "hourly"`, an item of the hour's digest (digests.ts), made into one notification per
 *   account and hour once the hour is over;
 * - attempts: each due notification is claimed by inserting its next attempt (lib/attempt-claim.ts),
 *   sent with the account's current SMTP server, and given its outcome: sent, or retried after an
 *   exponential, fully jittered backoff until the retry window ends, then failed.
 */
export class NotificationDelivererService implements NotificationDeliverer {
  readonly transport: MailTransport;
  private readonly instanceId = randomUUID();
  private readonly leaseMs: number;
  private readonly loop: Loop;
  private readonly store: AttemptStore;
  private readonly digests: Digests;
  private readonly sending = new Set<string>();
  private readonly running = new Set<Promise<void>>();

  constructor(private readonly o: NotificationDelivererOptions) {
    this.transport = o.transport ?? {};
    this.leaseMs = 2 * o.timeoutMs + 5_000;
    this.store = { deliveries: o.db.notificationDeliveries, attempts: o.db.notificationAttempts };
    this.digests = new Digests({ db: o.db, notifications: o.notifications });
    this.loop = new Loop(() => this.tick(), o.pollMs, (err) => o.log.warn({ err }, 'notification delivery loop failed'));
  }

  start(): void {
    this.loop.start();
  }

  /** The loop stops first, then the attempts in flight are waited for, so each records its outcome. */
  async stop(): Promise<void> {
    await this.loop.stop();
    await Promise.all(this.running);
  }

  /**
   * One outbox event: a notification when the account's email is on and selects its type.
   * Idempotent; throws on a database error so that the event stays pending and comes again.
   */
  async fanOut(event: OutboxEvent): Promise<void> {
    const settings = await this.o.notifications.stored(event.account_id);
    if (!settings?.enabled || !settings.events.includes(event.type) || !settings.from || settings.recipients.length === 0) return;
    const data = await this.withTransferName(event);
    if (settings.digest === 'hourly') return this.digests.keep(event, data);
    const { subject, text } = renderEmail(event.type, event.created_at, data);
    await this.insert(settings, { eventId: event._id, event: event.type, subject, text });
  }

  async queueEmail(accountId: string | Types.ObjectId, email: QueuedEmail): Promise<string | null> {
    const settings = await this.o.notifications.stored(accountId);
    if (!settings?.enabled || !settings.from || settings.recipients.length === 0) return null;
    // A caller's subject (a workflow step's, its run's data in it) goes into a header: one line, as renderEmail's.
    const id = await this.insert(settings, { ...email, subject: subjectLine(email.subject) });
    this.loop.wake();
    return id;
  }

  async sendTest(accountId: string): Promise<NotificationTestResult> {
    const settings = await this.o.notifications.stored(accountId);
    if (!settings?.smtp_host) throw new BadRequestError('email.smtp is not set: PUT /notifications/settings first');
    if (!settings.from) throw new BadRequestError('email.from is not set: PUT /notifications/settings first');
    if (settings.recipients.length === 0) throw new BadRequestError('email.recipients is empty: PUT /notifications/settings first');
    const now = new Date();
    const leaseEnd = new Date(now.getTime() + this.leaseMs);
    const { subject, text } = renderEmail('notification.test', now, { message: TEST_TEXT });
    // Created already claimed (attempt 1, not due before its lease ends), so no loop races for it.
    const delivery = await this.o.db.notificationDeliveries.create({
      account_id: settings.account_id, event_id: new Types.ObjectId(), event: 'notification.test', recipients: settings.recipients, from: settings.from,
      subject, text, attempts: 1, next_attempt_at: leaseEnd, first_attempt_at: now,
    });
    const attempt = await this.o.db.notificationAttempts.create({
      account_id: settings.account_id, delivery_id: delivery._id, n: 1, instance_id: this.instanceId, started_at: now, lease_expires_at: leaseEnd,
    });
    const result = await this.send(settings, delivery as Delivery);
    await this.record(delivery as Delivery, { attemptId: attempt._id, n: 1, firstAttemptAt: now }, result, false);
    return { success: result.ok, error: result.error, log_id: String(delivery._id) };
  }

  /** Inserts a notification for the account's current recipients; an existing one (same event id) is kept. */
  private async insert(settings: StoredNotificationSettings, email: QueuedEmail): Promise<string> {
    try {
      const created = await this.o.db.notificationDeliveries.create({
        account_id: settings.account_id, event_id: email.eventId, event: email.event, recipients: settings.recipients, from: settings.from,
        subject: email.subject, text: email.text, next_attempt_at: new Date(),
      });
      return String(created._id);
    } catch (err) {
      if (!isDuplicateKey(err)) throw err;
      const existing = await this.o.db.notificationDeliveries.findOne({ event_id: email.eventId }, { _id: 1 }).lean();
      return String(existing?._id);
    }
  }

  /** A transfer event's data with the transfer's name (the event itself carries its id only). */
  private async withTransferName(event: OutboxEvent): Promise<Record<string, unknown>> {
    const data = event.data as Record<string, unknown>;
    if (!event.type.startsWith('transfer.') || typeof data.id !== 'string' || data.name !== undefined || !Types.ObjectId.isValid(data.id)) return data;
    const transfer = await this.o.db.transfers.findOne({ _id: new Types.ObjectId(data.id), account_id: event.account_id }, { name: 1 }).lean();
    return transfer ? { name: transfer.name, ...data } : data;
  }

  private async tick(): Promise<void> {
    try {
      await this.digests.makeDue();
    } catch (err) {
      this.o.log.warn({ err }, 'notification digests could not be made; retrying on the next tick');
    }
    await this.attemptDue();
  }

  /** Starts due attempts up to PARALLEL_SENDS in flight, without waiting for them. */
  private async attemptDue(): Promise<void> {
    const free = PARALLEL_SENDS - this.sending.size;
    if (free <= 0) return;
    const due = await this.o.db.notificationDeliveries.find({
      status: 'pending', next_attempt_at: { $lte: new Date() }, _id: { $nin: [...this.sending].map((id) => new Types.ObjectId(id)) },
    }).sort({ next_attempt_at: 1 }).limit(Math.min(free, ATTEMPT_BATCH)).lean();
    for (const delivery of due) this.launch(delivery as Delivery);
  }

  private launch(delivery: Delivery): void {
    const id = String(delivery._id);
    this.sending.add(id);
    const run = this.attempt(delivery)
      .catch((err: unknown) => this.o.log.warn({ err, notificationId: id }, 'notification attempt could not be recorded; retrying on a later tick'))
      .finally(() => {
        this.sending.delete(id);
        this.running.delete(run);
        this.loop.wake();
      });
    this.running.add(run);
  }

  private async attempt(delivery: Delivery): Promise<void> {
    const settings = await this.o.notifications.stored(delivery.account_id);
    if (!settings?.enabled || !settings.smtp_host) {
      // Turned off since: what was pending is not sent.
      await this.o.db.notificationDeliveries.updateOne({ _id: delivery._id, status: 'pending' }, {
        $set: { status: 'cancelled', next_attempt_at: null, error: 'email notifications were turned off' },
      });
      return;
    }
    const claimed = await claimAttempt(this.store, delivery, this.instanceId, this.leaseMs);
    if (!claimed) return;
    const result = await this.send(settings, delivery);
    if (!result.ok) this.o.log.info({ notificationId: String(delivery._id), attempt: claimed.n, error: result.error }, 'notification attempt failed');
    await this.record(delivery, claimed, result, true);
  }

  /** Opens the password and sends; a password that cannot be opened is a failed attempt, not a crash. */
  private async send(settings: StoredNotificationSettings, delivery: Delivery): Promise<MailResult> {
    let smtp;
    try {
      smtp = this.o.notifications.smtpOf(settings);
    } catch (err) {
      this.o.log.error({ err, notificationId: String(delivery._id) }, 'SMTP password could not be opened');
      return { ok: false, durationMs: 0, error: 'the SMTP password could not be opened (master key missing?)' };
    }
    if (!smtp) return { ok: false, durationMs: 0, error: 'email.smtp is not set' };
    return sendMail(smtp, {
      from: delivery.from, to: delivery.recipients, subject: delivery.subject, text: delivery.text, event: delivery.event, notificationId: String(delivery._id),
    }, { policy: this.o.policy, timeoutMs: this.o.timeoutMs, ca: this.transport.ca, lookup: this.transport.lookup });
  }

  private async record(delivery: Delivery, claimed: Claim, result: MailResult, retry: boolean): Promise<void> {
    let update: Record<string, unknown>;
    if (result.ok) update = { status: 'sent', sent_at: new Date(), next_attempt_at: null, error: null };
    else {
      const next = retry ? retryAt(claimed, backoffDelayMs(claimed.n - 1, this.o.backoffBaseMs, this.o.backoffMaxMs), this.o.retryWindowMs) : null;
      update = next ? { status: 'pending', next_attempt_at: next, error: result.error } : { status: 'failed', next_attempt_at: null, error: result.error };
    }
    await finishAttempt(this.store, delivery._id, claimed, { duration_ms: result.durationMs, error: result.error }, update);
  }
}
