import fp from 'fastify-plugin';
import { TransfersService } from './transfers.service.js';

export { TransfersService, runConnection, stateConflict, transferNotFound, type RunConnection, type TransferOutcome } from './transfers.service.js';
export type { StoredTransfer } from './transfer-states.js';
export { checkTransferOptions, jobOptions, needsSync, presentedOptions, storedOptions } from './options.js';
export { CATCH_UP_MS, type RunPlan, type StartOutcome } from './queue-states.js';
export type { QueueEntry } from './queue.js';
export type { AgentSlots, HeldSlot } from './slots.js';

declare module 'fastify' {
  interface FastifyInstance {
    transfers: TransfersService;
  }
}

/** The transfers domain (transfers.service.ts over the state machine in transfer-states.ts), shared by the routes and the agent gateway. */
export default fp(
  async (app) => {
    app.decorate('transfers', new TransfersService({
      db: app.db, outbox: app.outbox, leaseMs: app.config.jobLeaseMs, pollMs: app.config.dispatchPollMs, log: app.log, metrics: app.metrics,
      maxTakeovers: app.config.jobMaxTakeovers, parameters: app.parameters,
    }));
  },
  { name: 'transfers', dependencies: ['mongoose', 'outbox', 'metrics', 'parameters'] },
);
