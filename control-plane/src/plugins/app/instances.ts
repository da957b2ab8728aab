import fp from 'fastify-plugin';
import { Loop } from '../../lib/loop.js';

/** A report older than this many heartbeat intervals no longer counts (the instance is taken for dead). */
export const LIVE_INTERVALS = 3;

/** Records stale for longer than this are removed when an instance starts (nothing else needs them). */
const FORGET_MS = 24 * 3600_000;

/**
 * This instance's record in `instances` (models/instance.model.ts): the master key it seals under,
 * written once per `instanceHeartbeatMs` and at once when the vault's active key changes (key files
 * replaced by `rotate-keys --new-key`), removed at a clean shutdown. Bounded work: one upsert of
 * one small document per instance per interval, never per request. Each heartbeat asks the vault
 * for its active key, so an idle instance notices a new key file within an interval too.
 */
export default fp(
  async (app) => {
    const { db, vault, config } = app;
    const id = app.agentHub.instanceId;
    const startedAt = new Date();
    let kid = vault.activeKid;
    let switched: { from: string; at: Date } | null = null;
    const beat = new Loop(async () => {
      const now = new Date();
      await db.instances.updateOne(
        { _id: id },
        {
          $set: {
            active_kid: vault.activeKid, key_source: config.masterKeys ? 'env' : 'files',
            seen_at: now, live_until: new Date(now.getTime() + LIVE_INTERVALS * config.instanceHeartbeatMs),
            switched_from: switched?.from ?? null, switched_at: switched?.at ?? null,
          },
          $setOnInsert: { started_at: startedAt },
        },
        { upsert: true },
      );
    }, config.instanceHeartbeatMs, (err) => app.log.warn({ err }, 'instance heartbeat failed'));
    vault.onActiveKeyChange((next) => {
      switched = { from: kid, at: new Date() };
      kid = next;
      app.log.info({ kid: next }, 'master key file changed: sealing under the new key');
      beat.wake();
    });
    app.addHook('onReady', async () => {
      await db.instances.deleteMany({ live_until: { $lt: new Date(Date.now() - FORGET_MS) } });
      beat.start();
    });
    app.addHook('preClose', async () => {
      await beat.stop();
      await db.instances.deleteOne({ _id: id }).catch((err: unknown) => app.log.warn({ err }, 'instance record not removed'));
    });
  },
  { name: 'instances', dependencies: ['mongoose', 'agents'] },
);
