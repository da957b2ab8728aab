import type { AgentMessage } from '@xfer/shared';
import type { AgentSession } from './session.js';

/** Listener signatures by event name. */
export type EventMap = { [event: string]: (...args: never[]) => void | Promise<void> };

/**
 * The typed events the gateway's pieces talk through: a piece that must hear of another's events
 * subscribes in its constructor, given the other as a dependency, so the order of construction
 * (index.ts) shows who talks to whom. Unlike Node's EventEmitter, `emit` calls the listeners one
 * after the other, awaiting each, and a listener's throw reaches whoever emitted: the emitter
 * contains it as for its own failures (a session's message handling closes that session with
 * 1011; a dispatcher step logs and runs again on the next tick).
 */
export class Events<M extends EventMap> {
  private readonly listeners = new Map<keyof M, Array<M[keyof M]>>();

  /** Adds a listener for `event`; listeners run in the order they were added. */
  on<E extends keyof M>(event: E, listener: M[E]): void {
    const list = this.listeners.get(event);
    if (list) list.push(listener);
    else this.listeners.set(event, [listener]);
  }

  /**
   * Runs the listeners of `event` in turn. The first runs synchronously, before `emit` returns
   * its promise: a listener that only wakes something up has done so when `emit` returns.
   */
  async emit<E extends keyof M>(event: E, ...args: Parameters<M[E]>): Promise<void> {
    for (const listener of this.listeners.get(event) ?? []) await (listener as (...a: Parameters<M[E]>) => void | Promise<void>)(...args);
  }
}

/** Watcher reports (shared/src/protocol/watch-protocol.ts). */
export type WatchReport = Extract<AgentMessage, { type: 'watch.found' | 'watch.polled' }>;
/** Plan reports and the apply side's page requests (shared/src/protocol/plan-protocol.ts). */
export type PlanMessage = Extract<AgentMessage, { type: 'plan.items' | 'plan.done' | 'plan.failed' | 'job.plan.query' }>;

/** Answers to requests (requests.ts: `ping`, `connection.test`, `source.settle`). */
export type Reply = Extract<AgentMessage, { type: 'pong' | 'connection.test.result' | 'source.settle.result' }>;

/** What the hub tells the rest of the gateway (subscribe with `AgentHub.on`). */
export type HubEvents = {
  /**
   * A session may have jobs to be sent: its welcome went out, the jobs it did not list at hello
   * were settled, or one of its runs ended and freed a slot (runs.ts). A throwing listener closes
   * that session with 1011.
   */
  ready: (session: AgentSession) => void;
  /** A reply to a request arrived; awaited in the session's order (a throw closes the session with 1011). */
  reply: (session: AgentSession, reply: Reply) => Promise<void>;
  /**
   * A watcher report arrived (`watch.found`, `watch.polled`: plugins/app/watchers/); awaited in the
   * session's order (a throw closes the session with 1011).
   */
  watch: (session: AgentSession, report: WatchReport) => Promise<void>;
  /** A plan frame arrived (plugins/app/plans/); awaited in the session's message order. */
  plan: (session: AgentSession, message: PlanMessage) => Promise<void>;
  /** A session closed and its registration was cleared; awaited before shutdown's wait ends. */
  closed: (session: AgentSession) => Promise<void>;
};
