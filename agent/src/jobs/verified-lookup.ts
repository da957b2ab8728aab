import { AgentToServer, frame, type AgentMessage, type PayloadOf, type VerifiedFile } from '@xfer/shared';

/** How long one `job.verified.query` may wait for its answer before the run gives up asking. */
export const VERIFIED_QUERY_TIMEOUT_MS = 10_000;

/** How a VerifiedLookup talks to the control plane. */
export interface VerifiedLookupOptions {
  /** Sends one message to the control plane (the session's `send`, as JobRunner gets it). */
  send: (message: AgentMessage) => void;
  timeoutMs?: number;
}

interface Waiting {
  resolve: (files: VerifiedFile[]) => void;
  reject: (err: Error) => void;
  timer: NodeJS.Timeout;
}

let requests = 0;

/**
 * The agent's end of the resume lookup (docs/agent.md "Resume"): asks the control plane which
 * files an earlier attempt of a job recorded verified (`job.verified.query`) and hands each
 * answer (`job.verified`) to the run that asked. A control plane that does not announce the lookup
 * in its welcome (an older one: it would close the session on a message type it does not know)
 * is never asked; a query that gets no answer in time (a session lost meanwhile, a slow control
 * plane) rejects. Either way the run falls back to the overwrite policy alone.
 */
export class VerifiedLookup {
  private supported = false;
  private readonly waiting = new Map<string, Waiting>();

  constructor(private readonly o: VerifiedLookupOptions) {}

  /** At every welcome: whether this control plane answers. Queries of the previous session will get no answer: they fail now. */
  sessionOpened(supported: boolean): void {
    this.supported = supported;
    for (const [id, w] of this.waiting) this.settle(id, w, () => w.reject(new Error('the session with the control plane was replaced before the answer')));
  }

  /** The files of `paths` that an earlier attempt of `jobId` copied and verified. Rejects when it cannot be known. */
  query(jobId: string, paths: string[], signal: AbortSignal): Promise<VerifiedFile[]> {
    if (!this.supported) return Promise.reject(new Error('the control plane does not answer verified-files queries'));
    if (signal.aborted) return Promise.reject(signal.reason as Error);
    requests = (requests + 1) % Number.MAX_SAFE_INTEGER;
    const requestId = `vq-${Date.now().toString(36)}-${requests.toString(36)}`;
    return new Promise<VerifiedFile[]>((resolve, reject) => {
      const timeoutMs = this.o.timeoutMs ?? VERIFIED_QUERY_TIMEOUT_MS;
      const onAbort = () => this.settle(requestId, w, () => reject(signal.reason as Error));
      const w: Waiting = {
        resolve: (files) => { signal.removeEventListener('abort', onAbort); resolve(files); },
        reject: (err) => { signal.removeEventListener('abort', onAbort); reject(err); },
        timer: setTimeout(() => this.settle(requestId, w, () => w.reject(new Error(`no answer from the control plane within ${timeoutMs} ms`))), timeoutMs),
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.waiting.set(requestId, w);
      const payload: PayloadOf<typeof AgentToServer, 'job.verified.query'> = { job_id: jobId, request_id: requestId, paths };
      this.o.send(frame(AgentToServer, 'job.verified.query', payload) as AgentMessage);
    });
  }

  /** A `job.verified` arrived; one for no waiting query (late, after a timeout) is dropped. */
  answered(answer: { request_id: string; files: VerifiedFile[] }): void {
    const w = this.waiting.get(answer.request_id);
    if (w) this.settle(answer.request_id, w, () => w.resolve(answer.files));
  }

  private settle(id: string, w: Waiting, then: () => void): void {
    if (this.waiting.get(id) !== w) return;
    this.waiting.delete(id);
    clearTimeout(w.timer);
    then();
  }
}
