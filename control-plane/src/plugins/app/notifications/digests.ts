import { createHash } from 'node:crypto';
import { Types } from 'mongoose';
import type { Models } from '../../../models/index.js';
import type { OutboxEventDoc } from '../../../models/outbox-event.model.js';
import { isDuplicateKey } from '../../../lib/duplicate-key.js';
import { renderDigest } from './message.js';
import type { NotificationsService } from './notifications.service.js';

const HOUR_MS = 3600_000;
const ITEM_BATCH = 500;

type OutboxEvent = OutboxEventDoc & { _id: Types.ObjectId };

/**
 * Hourly digests (docs/api.md "Notifications", docs/architecture.md "Notifications"): with
 * `digest: "hourly"`, the fan-out keeps each selected event as an item; once its hour has ended
 * and no event of the account from that hour is still waiting in the outbox (so every item of the
 * hour exists), the items become ONE notification, sent and retried like any other. Its id is
 * derived from (account, hour), so instances making it side by side make it once (unique
 * `event_id` of notifications).
 */
export class Digests {
  constructor(private readonly o: { db: Models; notifications: Pick<NotificationsService, 'stored'> }) {}

  /** Keeps `event` for its account's digest (idempotent: unique event_id). */
  async keep(event: OutboxEvent, data: Record<string, unknown>): Promise<void> {
    try {
      await this.o.db.notificationDigestItems.create({ account_id: event.account_id, event_id: event._id, event: event.type, at: event.created_at, data });
    } catch (err) {
      if (!isDuplicateKey(err)) throw err;
    }
  }

  /** Makes the notifications of every ended hour that is complete; resolves with how many were made. */
  async makeDue(now = new Date()): Promise<number> {
    const { db } = this.o;
    const thisHour = Math.floor(now.getTime() / HOUR_MS) * HOUR_MS;
    const waiting = await db.notificationDigestItems.find({ digest_id: null, at: { $lt: new Date(thisHour) } }, { account_id: 1, at: 1 })
      .sort({ at: 1 }).limit(ITEM_BATCH).lean();
    const hours = new Map<string, { accountId: Types.ObjectId; start: number }>();
    for (const item of waiting) {
      const start = Math.floor(item.at.getTime() / HOUR_MS) * HOUR_MS;
      hours.set(`${String(item.account_id)}:${start}`, { accountId: item.account_id, start });
    }
    let made = 0;
    for (const { accountId, start } of hours.values()) if (await this.make(accountId, start)) made++;
    return made;
  }

  private async make(accountId: Types.ObjectId, start: number): Promise<boolean> {
    const { db } = this.o;
    const end = new Date(start + HOUR_MS);
    // An event of that hour not fanned out yet would be left out: wait for it.
    if (await db.outboxEvents.exists({ account_id: accountId, status: 'pending', created_at: { $lt: end } })) return false;
    const inHour = { account_id: accountId, digest_id: null, at: { $gte: new Date(start), $lt: end } };
    const settings = await this.o.notifications.stored(accountId);
    if (!settings?.enabled || !settings.from || settings.recipients.length === 0) {
      // Turned off since: nothing to send them to.
      await db.notificationDigestItems.deleteMany(inHour);
      return false;
    }
    const items = await db.notificationDigestItems.find(inHour).sort({ at: 1, _id: 1 }).lean();
    if (items.length === 0) return false;
    const digestId = digestIdOf(accountId, start);
    const { subject, text } = renderDigest(new Date(start), items.map((i) => ({ event: i.event, at: i.at, data: i.data as Record<string, unknown> })));
    try {
      await db.notificationDeliveries.create({
        account_id: accountId, event_id: digestId, event: 'notification.digest', recipients: settings.recipients, from: settings.from,
        subject, text, next_attempt_at: new Date(),
      });
    } catch (err) {
      if (!isDuplicateKey(err)) throw err;
    }
    await db.notificationDigestItems.updateMany({ _id: { $in: items.map((i) => i._id) } }, { $set: { digest_id: digestId } });
    return true;
  }
}

/** The one id of an account's digest of the hour starting at `start` (12 bytes of a hash). */
function digestIdOf(accountId: Types.ObjectId, start: number): Types.ObjectId {
  return new Types.ObjectId(createHash('sha256').update(`xfer-digest:${String(accountId)}:${start}`).digest('hex').slice(0, 24));
}
