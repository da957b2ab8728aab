import { AgentToServer, frame, MAX_PLAN_ITEMS_PER_FRAME, type AgentMessage, type PayloadOf, type PlanItem, type PlanServerToAgent } from '@xfer/shared';
import type { Logger } from 'pino';
import type { Connector } from '../connectors/types.js';
import { reasonOf } from '../copy/errors.js';
import { truncate } from '../copy/stats.js';
import { computePlan } from '../copy/sync-engine.js';
import type { ConnectorSource } from '../lib/connector-source.js';
import { sleep } from '../lib/sleep.js';

export type PlanAssign = PayloadOf<typeof PlanServerToAgent, 'plan.assign'>;

/** Plans computed at once, at most; past it, `plan.failed` "agent busy". */
export const MAX_PLANS = 2;
/** UTF-8 bytes of one `plan.items` frame's paths, at most (a frame stays far below MAX_FRAME_BYTES). */
const MAX_BATCH_PATH_BYTES = 1024 * 1024;

/** How plans reach the control plane: writes to the open session, and a wait for the next one. */
export interface PlanLink {
  /** True once written to an open session's socket; false when none is open or the write failed. */
  write(message: AgentMessage): Promise<boolean>;
  opened(signal: AbortSignal): Promise<void>;
}

export interface PlanRunnerOptions {
  link: PlanLink;
  connectors: ConnectorSource;
  log: Logger;
  maxPlans?: number;
}

/**
 * Computes plans (`plan.assign`, plan-protocol.ts; docs/agent.md "Sync, move and plans"): lists
 * and compares both sides exactly as a run of the same options would (copy/sync-engine.ts
 * `computePlan`), writes nothing, and sends the items in `plan.items` batches (seq from 1, at most
 * MAX_PLAN_ITEMS_PER_FRAME each), then `plan.done` or `plan.failed`.
 *
 * Plans take no job slot (they write nothing and the control plane counts no slot for them);
 * at most MAX_PLANS run at once. Each batch is kept until it is written to an open session: while
 * the agent is disconnected the plan waits (its listing waits with it), and a batch whose write
 * failed goes out again after the next welcome. `plan.done.batches` lets the control plane check
 * it stored every batch (a batch lost in a dropped connection after its write shows as a gap).
 */
export class PlanRunner {
  private readonly running = new Map<string, AbortController>();

  constructor(private readonly o: PlanRunnerOptions) {}

  get active(): number {
    return this.running.size;
  }

  assign(plan: PlanAssign): void {
    const log = this.o.log.child({ plan_id: plan.plan_id });
    if (this.running.has(plan.plan_id)) {
      log.warn('plan assigned again while it is being computed: ignored');
      return;
    }
    const controller = new AbortController();
    if (this.running.size >= (this.o.maxPlans ?? MAX_PLANS)) {
      void this.deliver(plan.plan_id, 'plan.failed', { plan_id: plan.plan_id, error: `agent busy: already computing ${this.running.size} plans` }, controller.signal);
      return;
    }
    this.running.set(plan.plan_id, controller);
    void this.compute(plan, controller.signal, log)
      .catch((err: unknown) => log.error({ err: reasonOf(err) }, 'plan ended with an unexpected error'))
      .finally(() => this.running.delete(plan.plan_id));
  }

  /** Stops computing a plan (nothing more is sent for it); false when it does not run here. */
  cancel(planId: string): boolean {
    const controller = this.running.get(planId);
    controller?.abort(new Error('plan cancelled'));
    return controller !== undefined;
  }

  stopAll(): void {
    for (const controller of this.running.values()) controller.abort(new Error('agent shutting down'));
  }

  private async compute(plan: PlanAssign, signal: AbortSignal, log: Logger): Promise<void> {
    const opened: Connector[] = [];
    let seq = 0;
    let batch: PlanItem[] = [];
    let batchBytes = 0;
    const flush = async () => {
      if (batch.length === 0) return;
      const items = batch;
      batch = [];
      batchBytes = 0;
      seq++;
      await this.deliver(plan.plan_id, 'plan.items', { plan_id: plan.plan_id, seq, items }, signal);
    };
    try {
      const created = await Promise.allSettled([this.o.connectors.create(plan.source), this.o.connectors.create(plan.destination)]);
      for (const c of created) if (c.status === 'fulfilled') opened.push(c.value);
      for (const c of created) if (c.status === 'rejected') throw c.reason;
      const [source, destination] = opened as [Connector, Connector];
      log.info({ source: source.type, destination: destination.type, mode: plan.options.mode ?? 'copy' }, 'plan started');
      const { summary, fingerprint } = await computePlan({
        source, sourcePath: plan.source_path, destination, destinationPath: plan.destination_path, options: plan.options, resume: false, signal,
      }, {
        item: async (item) => {
          batch.push(item);
          batchBytes += Buffer.byteLength(item.path);
          if (batch.length >= MAX_PLAN_ITEMS_PER_FRAME || batchBytes >= MAX_BATCH_PATH_BYTES) await flush();
        },
      }, log);
      await flush();
      log.info({ batches: seq, ...summary }, 'plan done');
      await this.deliver(plan.plan_id, 'plan.done', { plan_id: plan.plan_id, batches: seq, summary, fingerprint }, signal);
    } catch (err) {
      if (signal.aborted) {
        log.info('plan cancelled');
        return;
      }
      const error = truncate(reasonOf(err), 4000);
      log.warn({ err: error }, 'plan failed');
      await this.deliver(plan.plan_id, 'plan.failed', { plan_id: plan.plan_id, error }, signal).catch(() => undefined);
    } finally {
      await Promise.all(opened.map((c) => c.close().catch((e: unknown) => log.warn({ err: reasonOf(e) }, 'closing a connector failed'))));
    }
  }

  /** Sends one plan frame, waiting for an open session as long as it takes (or until `signal` aborts). */
  private async deliver<T extends 'plan.items' | 'plan.done' | 'plan.failed'>(planId: string, type: T, payload: PayloadOf<typeof AgentToServer, T>, signal: AbortSignal): Promise<void> {
    const message = frame(AgentToServer, type, payload) as AgentMessage;
    for (;;) {
      signal.throwIfAborted();
      if (await this.o.link.write(message)) return;
      this.o.log.debug({ plan_id: planId, type }, 'no session: the plan waits for the next one');
      // A write that failed on a session still open (it is closing): let the close land first.
      await sleep(100, signal);
      await this.o.link.opened(signal);
    }
  }
}
