import type { AgentMessage } from '@xfer/shared';

type CredentialsMessage = Extract<AgentMessage, { type: 'connection.credentials' }>;

/** Whether `message` is kept while disconnected (rotated credentials; job reports are the ReportQueue's). */
export function isDurable(message: AgentMessage): boolean {
  return message.type === 'connection.credentials';
}

/**
 * Rotated credentials held while the session is down, sent after the next `welcome`. (Job
 * reports are held until acknowledged by the ReportQueue.)
 */
export class Outbox {
  /**
   * Rotated credentials per connection: the newest values, with the hashes of the oldest values
   * they replace (what the control plane still holds), so several rotations while disconnected
   * go out as one it accepts.
   */
  private readonly credentials = new Map<string, CredentialsMessage>();

  put(message: AgentMessage): void {
    if (message.type !== 'connection.credentials') return;
    const held = this.credentials.get(message.payload.connection_id);
    const previous = { ...message.payload.previous_sha256, ...held?.payload.previous_sha256 };
    const credentials = { ...held?.payload.credentials, ...message.payload.credentials };
    this.credentials.set(message.payload.connection_id, { ...message, payload: { ...message.payload, credentials, previous_sha256: previous } });
  }

  /** Everything held, and forgets it. */
  take(): AgentMessage[] {
    const out: AgentMessage[] = [...this.credentials.values()];
    this.credentials.clear();
    return out;
  }

  get size(): number {
    return this.credentials.size;
  }
}
