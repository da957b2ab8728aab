import { AgentToServer, frame, type AgentMessage, type PayloadOf, type RelayChunk, type ServerMessage } from '@xfer/shared';
import type { Logger } from 'pino';
import type { Slots } from '../jobs/slots.js';
import type { ConnectorSource } from '../lib/connector-source.js';
import type { AgentMetrics } from '../metrics/agent-metrics.js';
import type { RelayLink } from '../session/relay-link.js';
import { RelayDestination, RelayInterrupted, type RelayDestinationOptions } from './relay-destination.js';
import { RelaySource, type RelaySourceRequest } from './relay-source.js';

/** The relay messages the control plane sends an agent. */
export type RelayMessage = Extract<ServerMessage, { type: `relay.${string}` }>;

export interface RelaysOptions {
  /** The current session's link for relays; null when disconnected or the session does not relay. */
  link: () => RelayLink | null;
  /** The agent's connectors, with its owner's access rules (the source side builds its connector through them). */
  connectors: ConnectorSource;
  /** The agent's `max_jobs`, shared with the job runner: a source side takes one. */
  slots: Slots;
  log: Logger;
  metrics?: Pick<AgentMetrics, 'relayEnded'>;
}

/** What the job runner gives for the destination side of one of its jobs. */
export type DestinationRequest = Omit<RelayDestinationOptions, 'link' | 'onEnded'>;

/**
 * The relays this agent plays a side of, by job and attempt (relay-protocol.ts): routes the
 * control plane's `relay.*` messages and binary frames to them, starts the source side of a relay
 * on `relay.source` (taking one of the `max_jobs` slots, or refusing with `relay.end` "agent
 * busy"), and hands the job runner the destination side of its relayed jobs. Messages of relays
 * that ended (or never ran here) are dropped: they cross a `relay.end`. Every relay of a session
 * ends with it (each watches its link).
 */
export class Relays {
  private readonly sources = new Map<string, RelaySource>();
  private readonly destinations = new Map<string, RelayDestination>();
  private accepting = true;

  constructor(private readonly o: RelaysOptions) {}

  /**
   * Starts the destination side of a relayed job on the current session. Throws RelayInterrupted
   * when there is none (the session was lost since the assign): the run ends interrupted.
   */
  destination(request: DestinationRequest): RelayDestination {
    const link = this.o.link();
    if (!link) throw new RelayInterrupted('the session with the control plane was lost before the relay started');
    const key = keyOf(request.jobId, request.attempt);
    const relay = new RelayDestination({
      ...request, link,
      onEnded: () => {
        if (this.destinations.get(key) === relay) this.destinations.delete(key);
      },
    });
    this.destinations.set(key, relay);
    relay.start();
    return relay;
  }

  /** A `relay.*` message from the control plane. */
  message(m: RelayMessage): void {
    const key = keyOf(m.payload.job_id, m.payload.attempt);
    switch (m.type) {
      case 'relay.source':
        this.serve(m.payload);
        return;
      case 'relay.credit':
      case 'relay.want':
        return this.deliver(m.type, this.sources.get(key), (s) => s.message(m));
      case 'relay.entries':
        return this.deliver(m.type, this.destinations.get(key), (d) => d.message(m));
      case 'relay.end': {
        const source = this.sources.get(key);
        const destination = this.destinations.get(key);
        source?.message(m);
        destination?.message(m);
        if (!source && !destination) this.o.log.debug({ job_id: m.payload.job_id, attempt: m.payload.attempt }, 'relay.end for no relay here: dropped');
      }
    }
  }

  /** A binary frame: tar bytes for the destination side of that job attempt. */
  chunk(chunk: RelayChunk): void {
    const relay = this.destinations.get(keyOf(chunk.jobId, chunk.attempt));
    if (relay) relay.chunk(chunk.payload);
    else this.o.log.debug({ job_id: chunk.jobId, attempt: chunk.attempt }, 'relay bytes for no relay here: dropped');
  }

  /** Stops the source sides this agent serves for `jobId` (a `job.cancel`); whether there was one. */
  stopSources(jobId: string, reason: string): boolean {
    let stopped = false;
    for (const source of this.sources.values()) {
      if (source.request.job_id !== jobId) continue;
      source.stop(reason);
      stopped = true;
    }
    return stopped;
  }

  /** Source sides serving now. */
  get serving(): number {
    return this.sources.size;
  }

  /**
   * Serves no new relay; lets the source sides serving now finish for up to `timeoutMs` (their
   * destinations end them), then stops the rest ("agent shutting down": their jobs are taken over).
   */
  async drain(timeoutMs: number): Promise<void> {
    this.accepting = false;
    if (this.sources.size === 0) return;
    let timer: NodeJS.Timeout | undefined;
    const timedOut = await Promise.race([
      Promise.all([...this.sources.values()].map((s) => s.done)).then(() => false),
      new Promise<boolean>((resolve) => { timer = setTimeout(() => resolve(true), timeoutMs); }),
    ]);
    clearTimeout(timer);
    if (timedOut) await this.stopAll('agent shutting down: the source side of the relay was stopped');
  }

  /** Stops every source side and waits until each has ended. */
  async stopAll(reason: string): Promise<void> {
    const sources = [...this.sources.values()];
    for (const source of sources) source.stop(reason);
    await Promise.all(sources.map((s) => s.done));
  }

  private serve(request: RelaySourceRequest): void {
    const { log, slots } = this.o;
    const link = this.o.link();
    if (!link) return;
    const key = keyOf(request.job_id, request.attempt);
    const ref = { job_id: request.job_id, attempt: request.attempt };
    if (this.sources.has(key)) {
      log.warn(ref, 'relay.source for a relay served already: ignored');
      return;
    }
    const refuse = (error: string, permanent = false) => {
      log.warn({ ...ref, error }, 'relay refused');
      const end: PayloadOf<typeof AgentToServer, 'relay.end'> = { ...ref, error, ...(permanent ? { permanent } : {}) };
      link.send(frame(AgentToServer, 'relay.end', end) as AgentMessage);
    };
    if (this.destinations.has(key)) return refuse('this agent is the destination side of this relay');
    if (!this.accepting) return refuse('agent shutting down: not serving relays');
    if (!slots.take()) return refuse(slots.busyMessage());
    log.info({ ...ref, source: request.source.type, concurrency: request.concurrency }, 'serving the source side of a relay');
    let source: RelaySource;
    try {
      source = new RelaySource({
        link, request, connectors: this.o.connectors, log: log.child({ ...ref, relay: 'source' }),
        onEnded: (end) => {
          if (this.sources.get(key) === source) this.sources.delete(key);
          slots.release();
          this.o.metrics?.relayEnded('source', end.sourceType, end.status, end.bytesSent);
        },
      });
    } catch (err) {
      // A source path the connectors would refuse anyway (control characters, climbing out).
      slots.release();
      return refuse(err instanceof Error ? err.message : String(err), true);
    }
    this.sources.set(key, source);
  }

  private deliver<T>(type: string, relay: T | undefined, then: (relay: T) => void): void {
    if (relay) then(relay);
    else this.o.log.debug({ type }, 'relay message for no relay here: dropped');
  }
}

function keyOf(jobId: string, attempt: number): string {
  return `${jobId}/${attempt}`;
}
