import { AgentToServer, frame, type AgentMessage, type PayloadOf, type PlanItem, type PlanServerToAgent } from '@xfer/shared';
import { compareKeys } from '../copy/ordered-listing.js';

/** How long one `job.plan.query` may wait for its page. */
export const PLAN_QUERY_TIMEOUT_MS = 30_000;
/** Items asked per page. */
const PAGE_ITEMS = 500;

type Page = PayloadOf<typeof PlanServerToAgent, 'job.plan.page'>;

interface Waiting {
  resolve: (page: Page) => void;
  reject: (err: Error) => void;
  timer: NodeJS.Timeout;
}

let requests = 0;

/**
 * The agent's end of a plan's apply (`job.assign.plan_id`; plan-protocol.ts): pages through the
 * stored items with `job.plan.query` (after the last path seen) and hands each `job.plan.page` to
 * the run that asked. Unlike the resume lookup (verified-lookup.ts) there is nothing to fall back
 * on: a page that does not come in time (a lost session, a slow control plane) fails the run, and
 * nothing is deleted (copy/sync-engine.ts deletes only after every item was done).
 */
export class PlanPages {
  private readonly waiting = new Map<string, Waiting>();

  constructor(private readonly o: { send: (message: AgentMessage) => void; timeoutMs?: number }) {}

  /** The plan's items for job `jobId`, in path order, one page in memory at a time. */
  async *items(jobId: string, signal: AbortSignal): AsyncGenerator<PlanItem> {
    let after: string | undefined;
    for (;;) {
      const page = await this.query(jobId, after, signal);
      for (const item of page.items) {
        if (after !== undefined && compareKeys(item.path, after) <= 0) throw new Error(`the plan's page went back to ${JSON.stringify(item.path)} after ${JSON.stringify(after)}`);
        yield item;
        after = item.path;
      }
      if (page.done) return;
      if (page.items.length === 0) throw new Error('the control plane sent an empty page of the plan that is not its last');
    }
  }

  /** A `job.plan.page` arrived; one for no waiting query (late) is dropped. */
  answered(page: Page): void {
    const w = this.waiting.get(page.request_id);
    if (!w) return;
    this.waiting.delete(page.request_id);
    clearTimeout(w.timer);
    w.resolve(page);
  }

  /** A new session: queries of the previous one get no answer. */
  sessionOpened(): void {
    for (const [id, w] of this.waiting) {
      this.waiting.delete(id);
      clearTimeout(w.timer);
      w.reject(new Error('the session with the control plane was replaced before the plan page came'));
    }
  }

  private query(jobId: string, after: string | undefined, signal: AbortSignal): Promise<Page> {
    signal.throwIfAborted();
    requests = (requests + 1) % Number.MAX_SAFE_INTEGER;
    const requestId = `pq-${Date.now().toString(36)}-${requests.toString(36)}`;
    const timeoutMs = this.o.timeoutMs ?? PLAN_QUERY_TIMEOUT_MS;
    return new Promise<Page>((resolve, reject) => {
      const settle = (then: () => void) => {
        if (this.waiting.get(requestId) !== w) return;
        this.waiting.delete(requestId);
        clearTimeout(w.timer);
        signal.removeEventListener('abort', onAbort);
        then();
      };
      const onAbort = () => settle(() => reject(signal.reason as Error));
      const w: Waiting = {
        resolve: (page) => { signal.removeEventListener('abort', onAbort); resolve(page); },
        reject: (err) => { signal.removeEventListener('abort', onAbort); reject(err); },
        timer: setTimeout(() => settle(() => reject(new Error(`no page of the plan from the control plane within ${timeoutMs} ms`))), timeoutMs),
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.waiting.set(requestId, w);
      const payload: PayloadOf<typeof AgentToServer, 'job.plan.query'> = { job_id: jobId, request_id: requestId, limit: PAGE_ITEMS, ...(after !== undefined ? { after } : {}) };
      this.o.send(frame(AgentToServer, 'job.plan.query', payload) as AgentMessage);
    });
  }
}
