import fp from 'fastify-plugin';
import { Types } from 'mongoose';

/** Event types of api.md "Events" written so far. */
export type OutboxEventType =
  | 'transfer.started' | 'transfer.completed' | 'transfer.failed'
  | 'file.uploaded' | 'file.downloaded' | 'file.deleted' | 'file.shared' | 'file.scan_blocked';

export interface Outbox {
  /**
   * Records a domain event for delivery to the account's webhooks. Called right after the change
   * that caused it succeeded (no transactions: a crash in between loses the event, never invents one).
   */
  emit(accountId: string | Types.ObjectId, type: OutboxEventType, data: Record<string, unknown>): Promise<void>;
}

declare module 'fastify' {
  interface FastifyInstance {
    outbox: Outbox;
  }
}

/** The events outbox (`outbox_events`); plugins/app/webhook-deliverer.ts fans its rows out to the subscribed webhooks. */
export default fp(
  async (app) => {
    app.decorate<Outbox>('outbox', {
      async emit(accountId, type, data) {
        await app.db.outboxEvents.create({ account_id: new Types.ObjectId(String(accountId)), type, data });
      },
    });
  },
  { name: 'outbox', dependencies: ['mongoose'] },
);
