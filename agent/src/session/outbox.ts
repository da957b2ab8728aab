import type { AgentMessage } from '@xfer/shared';

/** Message types that must reach the control plane even across a disconnect. */
const TERMINAL = new Set(['job.completed', 'job.failed', 'job.cancelled']);
/** The protocol's cap on FileResults per progress message. */
const MAX_FILES = 1000;

type ProgressMessage = Extract<AgentMessage, { type: 'job.progress' }>;

type CredentialsMessage = Extract<AgentMessage, { type: 'connection.credentials' }>;

/** Whether `message` is kept while disconnected (terminal job messages, progress, rotated credentials). */
export function isDurable(message: AgentMessage): boolean {
  return message.type === 'job.progress' || message.type === 'connection.credentials' || TERMINAL.has(message.type);
}

/**
 * Messages held while the session is down, sent after the next `welcome`: per job, the latest
 * `job.progress` (counters are cumulative, so the latest says everything; the FileResults of
 * superseded ones are carried over, up to the protocol's 1000) and its terminal message. Memory
 * is one slot per job that changed while disconnected.
 */
export class Outbox {
  private readonly slots = new Map<string, { progress?: ProgressMessage; terminal?: AgentMessage }>();
  /**
   * Rotated credentials per connection: the newest values, with the hashes of the oldest values
   * they replace (what the control plane still holds), so several rotations while disconnected
   * go out as one it accepts.
   */
  private readonly credentials = new Map<string, CredentialsMessage>();

  put(message: AgentMessage): void {
    if (!isDurable(message)) return;
    if (message.type === 'connection.credentials') {
      const held = this.credentials.get(message.payload.connection_id);
      const previous = { ...message.payload.previous_sha256, ...held?.payload.previous_sha256 };
      const credentials = { ...held?.payload.credentials, ...message.payload.credentials };
      this.credentials.set(message.payload.connection_id, { ...message, payload: { ...message.payload, credentials, previous_sha256: previous } });
      return;
    }
    const jobId = (message.payload as { job_id: string }).job_id;
    let slot = this.slots.get(jobId);
    if (!slot) this.slots.set(jobId, (slot = {}));
    if (message.type !== 'job.progress') {
      slot.terminal = message;
      return;
    }
    if (slot.terminal) return; // progress after the end is stale
    const carried = slot.progress?.payload.files ?? [];
    const files = carried.length === 0 ? message.payload.files : [...carried, ...message.payload.files].slice(-MAX_FILES);
    slot.progress = { ...message, payload: { ...message.payload, files } };
  }

  /** Everything held, in sending order (per job: progress, then its end), and forgets it. */
  take(): AgentMessage[] {
    // Credentials first: a job's end may free the connector whose rotation they are.
    const out: AgentMessage[] = [...this.credentials.values()];
    this.credentials.clear();
    for (const slot of this.slots.values()) {
      if (slot.progress) out.push(slot.progress);
      if (slot.terminal) out.push(slot.terminal);
    }
    this.slots.clear();
    return out;
  }

  get size(): number {
    return this.slots.size + this.credentials.size;
  }
}
