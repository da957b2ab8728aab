import fp from 'fastify-plugin';
import { Types } from 'mongoose';
import type { Models } from '../../../models/index.js';
import { isDuplicateKey } from '../../../lib/duplicate-key.js';

/**
 * Event types this server emits: api.md "Events" and this service's own `workflow.*` (every one
 * a webhook may subscribe to, shared `WEBHOOK_EVENT_TYPES`; control-plane/test/outbox-events.test.ts
 * keeps the two lists equal).
 */
export const OUTBOX_EVENT_TYPES = [
  'transfer.started', 'transfer.completed', 'transfer.failed',
  'file.uploaded', 'file.downloaded', 'file.deleted', 'file.shared', 'file.scan_blocked',
  'workflow.notify', 'workflow.completed', 'workflow.failed',
  'user.login', 'user.registered',
  'data_room.created', 'data_room.file_added', 'data_room.member_added',
] as const;
export type OutboxEventType = (typeof OUTBOX_EVENT_TYPES)[number];

/** What other domains depend on: the one call that records an event. */
export interface Outbox {
  /**
   * Records a domain event for delivery to the account's webhooks. Called right after the change
   * that caused it succeeded (no transactions: a crash in between loses the event, never invents one).
   * With `id`, the event is recorded once however often it is emitted (a workflow step repeated
   * after a crash): a second emit with the same id meets the unique `_id` and does nothing.
   */
  emit(accountId: string | Types.ObjectId, type: OutboxEventType, data: Record<string, unknown>, id?: Types.ObjectId): Promise<void>;
}

/** The events outbox (`outbox_events`); deliverer.service.ts fans its rows out to the subscribed webhooks. */
export class OutboxService implements Outbox {
  private readonly db: Models;

  constructor(options: { db: Models }) {
    this.db = options.db;
  }

  async emit(accountId: string | Types.ObjectId, type: OutboxEventType, data: Record<string, unknown>, id?: Types.ObjectId): Promise<void> {
    try {
      await this.db.outboxEvents.create({ ...(id ? { _id: id } : {}), account_id: new Types.ObjectId(String(accountId)), type, data });
    } catch (err) {
      if (!id || !isDuplicateKey(err)) throw err;
    }
  }
}

declare module 'fastify' {
  interface FastifyInstance {
    outbox: Outbox;
  }
}

/** Decorates `app.outbox`. */
export default fp(
  async (app) => {
    app.decorate<Outbox>('outbox', new OutboxService({ db: app.db }));
  },
  { name: 'outbox', dependencies: ['mongoose'] },
);
