import type { FastifyBaseLogger } from 'fastify';
import type { WebSocket } from 'ws';
import { Types } from 'mongoose';
import type { RelayChunk } from '@xfer/shared';
import type { Models } from '../../../models/index.js';
import type { AgentDoc } from '../../../models/agent.model.js';
import { Loop } from '../../../lib/loop.js';
import { signPeerToken, verifyPeerToken, type PeerLinkClaims } from '../../../lib/peer-token.js';
import { NotFoundError } from '../../../errors.js';
import type { AgentHub, AgentRelayMessage, AgentSession, RelayTraffic } from '../agents/index.js';
import type { ConnectionsService } from '../connections/index.js';
import type { StoredTransfer } from '../transfers/index.js';
import type { MetricsService } from '../metrics/index.js';
import { CONTROL_PIPE_BYTES, DATA_PIPE_BYTES, SessionEnd } from './ends.js';
import { LinkCloseCodes, PeerLink } from './peer-link.js';
import { Relay, type RelayOutcome, type Side } from './relay.js';
import { markRelayed, recordSent } from './vouched.js';
import { relayListing } from '../transfers/options.js';

/** How long a peer-link token is good for: the dial that follows at once. */
const LINK_TOKEN_TTL_MS = 60_000;
/** The relay messages each side sends (what a link from that side may carry). */
const FROM_SOURCE = new Set(['relay.entries', 'relay.sent', 'relay.end']);
const FROM_DESTINATION = new Set(['relay.credit', 'relay.want', 'relay.end']);
/** Relay keys a session was told about with a `relay.end` answer (one answer per key). */
const MAX_STALE_ANSWERS = 256;

export interface RelayServiceOptions {
  db: Models;
  hub: Pick<AgentHub, 'get' | 'instanceId'>;
  connections: Pick<ConnectionsService, 'settingsFor'>;
  /** HMAC keys of peer-link tokens, the signing key first (Vault.derivedKeys). */
  linkKeys: Buffer[];
  /** Whether an agent's registered session is fresh (AgentsService.isOnline). */
  isOnline(doc: Pick<AgentDoc, 'session'>): boolean;
  /** Takes the job over after a relay lost a side (TransfersService.interrupt): once per (job, attempt). */
  takeOver(jobId: string, attempt: number, reason: string): Promise<unknown>;
  /** Fails the job's attempt (a relay that broke or cannot run). */
  fail(jobId: string, attempt: number, reason: string): Promise<unknown>;
  metrics: Pick<MetricsService, 'relayForwarded' | 'relayEnded'>;
  heartbeatMs: number;
  /** How often the relays' runs are checked in the database (XFER_DISPATCH_POLL_MS). */
  pollMs: number;
  log: FastifyBaseLogger;
}

/** What the link route hands `acceptLink` once `checkLink` passed. */
export interface LinkGrant {
  claims: PeerLinkClaims;
  job: StoredTransfer;
}
export type LinkCheck = { ok: true; grant: LinkGrant } | { ok: false; status: 401 | 409; error: string };

/** A relay on this instance, with the agents of its run (a changed run ends it). */
interface Held {
  relay: Relay;
  destinationAgentId: string;
  sourceAgentId: string;
}

/**
 * The relays of this instance (docs/architecture.md "Relays"). As **host** (it sent the
 * destination agent its relayed `job.assign`): `start` sends `relay.source` to the source agent
 * when its socket is here, else dials the instance holding it (a peer link); it takes the job
 * over when a side is lost and fails it when a side breaks the protocol. As **peer**: it accepts
 * a host's link for the source agent here (`checkLink`, `acceptLink`), sends `relay.source`
 * itself (credentials never cross instances) and bridges. Every relay ends when either side says
 * so, when its run ends (watched in the database), or when a side is lost. Implements the hub's
 * RelayTraffic: the agents' relay frames arrive here.
 */
export class RelayService implements RelayTraffic {
  private readonly hosted = new Map<string, Held>();
  private readonly served = new Map<string, Held>();
  private readonly bySession = new Map<AgentSession, Set<Relay>>();
  private readonly staleAnswers = new WeakMap<AgentSession, Set<string>>();
  /** Peer-link token nonces seen, until they expire: each token opens one link. */
  private readonly usedNonces = new Map<string, number>();
  /** Takeovers and failures in flight (shutdown waits for them). */
  private readonly actions = new Set<Promise<void>>();
  private readonly loop: Loop;
  private closing = false;

  constructor(private readonly o: RelayServiceOptions) {
    this.loop = new Loop(() => this.watch(), o.pollMs, (err) => o.log.warn({ err }, 'watching the relays\' runs failed'));
  }

  /** Starts watching the runs of the relays (when the app is ready). */
  startWatching(): void {
    this.loop.start();
  }

  /** Relays held here and what they hold in flight (metrics, tests). */
  stats(): { hosted: number; served: number; inFlightBytes: number; inFlightFrames: number } {
    let inFlightBytes = 0;
    let inFlightFrames = 0;
    for (const held of [...this.hosted.values(), ...this.served.values()]) {
      inFlightBytes += held.relay.inFlight;
      inFlightFrames += held.relay.framesInFlight;
    }
    return { hosted: this.hosted.size, served: this.served.size, inFlightBytes, inFlightFrames };
  }

  /**
   * Hosts the relay of `job`'s current attempt, whose relayed `job.assign` just went to
   * `destination` (the dispatcher's RelayStarter). Call it in the same turn as the send, with no
   * `await` between: the destination may grant credit as soon as it reads the assign, and a frame
   * about a relay not registered yet is answered with `relay.end`. The relay is registered before
   * this returns its promise (synchronously), so the destination's frames are taken from then on;
   * the source side is set up in the background, and any failure of it ends the relay (the job is
   * then taken over, or failed when a takeover would not help).
   */
  async start(job: StoredTransfer, destination: AgentSession): Promise<void> {
    const jobId = String(job._id);
    const key = `${jobId}:${job.attempt}`;
    if (this.hosted.has(key)) return;
    const relay = new Relay({
      jobId, attempt: job.attempt, role: 'host', onEnd: (r, outcome) => this.ended(r, outcome), forwarded: (n) => this.o.metrics.relayForwarded(n),
      vouched: (files) => recordSent(this.o.db, job.account_id, jobId, job.attempt, files).catch((err: unknown) => {
        this.o.log.warn({ err, jobId, attempt: job.attempt }, 'recording what a relay\'s source sent failed: those files stay at the source');
      }),
    });
    relay.attachDestination(new SessionEnd(destination, DATA_PIPE_BYTES));
    this.hosted.set(key, { relay, destinationAgentId: destination.agent.id, sourceAgentId: String(job.source_agent_id) });
    this.index(destination, relay);
    this.o.log.info({ jobId, attempt: job.attempt, destination: destination.agent.id, source: String(job.source_agent_id) }, 'relay started');
    if (this.closing) return relay.end({ kind: 'lost', side: null, error: 'The control-plane instance carrying the relay is shutting down' });
    if (!destination.open) return relay.end({ kind: 'lost', side: 'destination', error: `Relay destination agent ${destination.agent.name} disconnected` });
    const wrong = job.mode !== 'relay' || !job.source_agent_id ? 'the run is not relayed'
      : String(job.agent_id) !== destination.agent.id ? `agent ${destination.agent.name} does not run it`
        : String(job.source_agent_id) === destination.agent.id ? 'its source and destination agents are the same'
        : !destination.relay ? `agent ${destination.agent.name} did not offer relays` : null;
    if (wrong) return relay.end({ kind: 'failed', side: null, error: `The relay of job ${jobId} cannot start: ${wrong}` });
    this.connectSource(relay, job).catch((err: unknown) => {
      this.o.log.error({ err, jobId }, 'setting up a relay failed');
      relay.end({ kind: 'failed', side: null, error: 'The relay could not be set up (internal error)' });
    });
  }

  // ---- the agents' relay traffic (RelayTraffic) ----

  message(session: AgentSession, message: AgentRelayMessage): void {
    const { job_id: jobId, attempt } = message.payload;
    const found = this.find(session, `${jobId}:${attempt}`);
    if (!found) return this.stale(session, jobId, attempt);
    if (found.side === 'destination') found.relay.fromDestination(message);
    else found.relay.fromSource(message);
  }

  binary(session: AgentSession, chunk: RelayChunk, frame: Buffer): void {
    const found = this.find(session, `${chunk.jobId}:${chunk.attempt}`);
    if (!found) return this.stale(session, chunk.jobId, chunk.attempt);
    if (found.side === 'source') return found.relay.fromSourceBinary(chunk, frame);
    found.relay.end({ kind: 'failed', side: 'destination', error: `Relay destination agent ${session.agent.name} sent relay bytes, which only a source sends` });
  }

  closed(session: AgentSession): void {
    const relays = this.bySession.get(session);
    if (!relays) return;
    this.bySession.delete(session);
    for (const relay of relays) {
      const side = sideOf(relay, session) ?? 'destination';
      relay.end({ kind: 'lost', side, error: `Relay ${side} agent ${session.agent.name} disconnected` });
    }
  }

  // ---- peer links ----

  /**
   * The checks of a host's dial, before the upgrade: a token one of our master keys made for this
   * instance, not expired and not used before (401 otherwise, whatever failed), for a job that is
   * running relayed at that attempt from that source agent, whose socket is here (409 otherwise).
   */
  async checkLink(token: string | null): Promise<LinkCheck> {
    const claims = token ? verifyPeerToken(this.o.linkKeys, token) : null;
    if (!claims || claims.instance_id !== this.o.hub.instanceId || this.usedNonces.has(claims.nonce)) {
      return { ok: false, status: 401, error: 'A valid relay link token is required' };
    }
    this.usedNonces.set(claims.nonce, claims.expires_at);
    const job = await this.o.db.transfers.collection.findOne<StoredTransfer>({ _id: new Types.ObjectId(claims.job_id) });
    const key = `${claims.job_id}:${claims.attempt}`;
    const source = this.o.hub.get(claims.source_agent_id);
    let problem: string | null = null;
    if (!job || job.status !== 'in-progress' || job.attempt !== claims.attempt || job.mode !== 'relay' || String(job.source_agent_id) !== claims.source_agent_id) {
      problem = `Job ${claims.job_id} attempt ${claims.attempt} is not running relayed from that agent`;
    } else if (!source?.relay) problem = 'The relay\'s source agent is not connected to this instance';
    else if (this.served.has(key)) problem = `The relay of job ${claims.job_id} attempt ${claims.attempt} is linked already`;
    return problem ? { ok: false, status: 409, error: problem } : { ok: true, grant: { claims, job: job! } };
  }

  /** Serves the source side of a relay for the host that dialled `socket` (after `checkLink`). */
  acceptLink(socket: WebSocket, { claims, job }: LinkGrant): void {
    const key = `${claims.job_id}:${claims.attempt}`;
    const source = this.o.hub.get(claims.source_agent_id);
    if (this.closing) return socket.close(LinkCloseCodes.goingAway, 'instance shutting down');
    if (this.served.has(key)) return socket.close(LinkCloseCodes.duplicate, 'relay linked already');
    if (!source?.relay) return socket.close(LinkCloseCodes.lost, 'the relay source agent is not connected here');
    const relay = new Relay({ jobId: claims.job_id, attempt: claims.attempt, role: 'peer', onEnd: (r, outcome) => this.ended(r, outcome), forwarded: () => undefined });
    const link = new PeerLink(socket, {
      jobId: claims.job_id, attempt: claims.attempt, accepts: FROM_DESTINATION, heartbeatMs: this.o.heartbeatMs, log: this.o.log, label: 'the link to the relay\'s host',
    }, {
      message: (m) => relay.fromDestination(m),
      closed: ({ code, reason, notice }) => {
        if (notice && code === LinkCloseCodes.normal) return relay.fromDestination({ type: 'relay.end', payload: notice } as AgentRelayMessage);
        relay.end({ kind: 'lost', side: 'destination', error: `The link to the instance hosting the relay closed (${reason || code})` });
      },
    });
    relay.attachDestination(link);
    this.served.set(key, { relay, destinationAgentId: String(job.agent_id), sourceAgentId: claims.source_agent_id });
    this.o.log.info({ jobId: claims.job_id, attempt: claims.attempt, source: claims.source_agent_id }, 'relay link accepted');
    this.serveSource(relay, job, source).catch((err: unknown) => {
      this.o.log.error({ err, jobId: claims.job_id }, 'serving a relay source failed');
      relay.end({ kind: 'failed', side: 'source', error: 'The relay source could not be set up (internal error)' });
    });
  }

  /**
   * When the app starts closing, before the agents' sockets close: every relay ends as lost (its
   * agents are told why, its jobs are taken over). No new relay starts from then on.
   */
  shutdown(): void {
    this.closing = true;
    for (const held of [...this.hosted.values(), ...this.served.values()]) {
      held.relay.end({ kind: 'lost', side: null, error: 'The control-plane instance carrying the relay is shutting down' });
    }
  }

  /** At shutdown: the loop stops, the relays end (`shutdown`), and their takeovers are awaited. */
  async stop(): Promise<void> {
    this.shutdown();
    await this.loop.stop();
    while (this.actions.size > 0) await Promise.allSettled([...this.actions]);
  }

  // ---- setting up the source side ----

  /** Host: the source agent here (served directly) or on another instance (dialled). */
  private async connectSource(relay: Relay, job: StoredTransfer): Promise<void> {
    // Before any source byte flows: what this attempt verifies is then settled only as its source vouched (vouched.ts).
    await markRelayed(this.o.db, job.account_id, relay.jobId, relay.attempt);
    if (relay.over) return;
    const sourceId = String(job.source_agent_id);
    const here = this.o.hub.get(sourceId);
    if (here) {
      if (!here.relay) return relay.end({ kind: 'failed', side: 'source', error: `Agent ${here.agent.name} cannot serve a relay's source (it did not offer relays)` });
      return this.serveSource(relay, job, here);
    }
    const agent = await this.o.db.agents.findById(sourceId, { name: 1, session: 1 }).lean();
    const name = agent?.name ?? sourceId;
    const session = agent?.session;
    if (relay.over) return;
    if (!agent || !session || !this.o.isOnline(agent) || !session.instance_url || session.instance_id === this.o.hub.instanceId) {
      return relay.end({ kind: 'lost', side: 'source', error: `Relay source agent ${name} is not connected` });
    }
    const token = signPeerToken(this.o.linkKeys[0]!, {
      job_id: relay.jobId, attempt: relay.attempt, source_agent_id: sourceId, instance_id: session.instance_id, expires_at: Date.now() + LINK_TOKEN_TTL_MS,
    });
    const through = `instance ${session.instance_id}`;
    const link: PeerLink = PeerLink.dial(session.instance_url, token, {
      jobId: relay.jobId, attempt: relay.attempt, accepts: FROM_SOURCE, heartbeatMs: this.o.heartbeatMs, log: this.o.log, label: `agent ${name} (through ${through})`,
    }, {
      opened: () => relay.attachSource(link),
      message: (m) => relay.fromSource(m),
      binary: (chunk, frame) => relay.fromSourceBinary(chunk, frame),
      closed: ({ code, reason, notice, refusal }) => {
        if (relay.over) return;
        if (notice && code === LinkCloseCodes.normal) return relay.fromSource({ type: 'relay.end', payload: notice } as AgentRelayMessage);
        const error = notice?.error ?? reason;
        if (code === LinkCloseCodes.failed) return relay.end({ kind: 'failed', side: 'source', error: error || `Relay source agent ${name} failed` });
        const why = refusal ? `refused the relay link (HTTP ${refusal})` : error || `closed the relay link (${code})`;
        relay.end({ kind: 'lost', side: 'source', error: code === LinkCloseCodes.lost && error ? error : `The link to ${through}, holding relay source agent ${name}, was lost: ${why}` });
      },
    });
  }

  /** Sends `relay.source` (decrypted only into that frame) to the source agent here, and attaches it. */
  private async serveSource(relay: Relay, job: StoredTransfer, session: AgentSession): Promise<void> {
    const connectionId = String(job.source_connection_id);
    let source;
    try {
      source = await this.o.connections.settingsFor(job.account_id, connectionId, session.agent.id);
    } catch (err) {
      if (!(err instanceof NotFoundError)) this.o.log.error({ err, jobId: relay.jobId }, 'could not prepare a relay source connection');
      const error = err instanceof NotFoundError
        ? `The source connection ${connectionId} was deleted before the job could start`
        : `The source connection ${connectionId} could not be prepared: ${(err as Error).message}`;
      return relay.end({ kind: 'failed', side: 'source', error });
    }
    if (relay.over) return;
    const lost = `Relay source agent ${session.agent.name} disconnected`;
    if (!session.open) return relay.end({ kind: 'lost', side: 'source', error: lost });
    const end = new SessionEnd(session, CONTROL_PIPE_BYTES);
    const listing = relayListing(job.options);
    const sent = end.sendSource({
      job_id: relay.jobId, attempt: relay.attempt, source, source_path: job.source_path, concurrency: job.options!.concurrency,
      ...(listing ? { listing } : {}),
    });
    if (!sent) {
      end.finish({ notice: null, code: LinkCloseCodes.lost, reason: lost });
      return relay.end({ kind: 'lost', side: 'source', error: lost });
    }
    this.index(session, relay);
    relay.attachSource(end);
  }

  // ---- bookkeeping ----

  private index(session: AgentSession, relay: Relay): void {
    let relays = this.bySession.get(session);
    if (!relays) this.bySession.set(session, (relays = new Set()));
    relays.add(relay);
  }

  /** The relay `key` and the part `session` plays in it, if any. */
  private find(session: AgentSession, key: string): { relay: Relay; side: Side } | null {
    for (const held of [this.hosted.get(key), this.served.get(key)]) {
      const side = held && sideOf(held.relay, session);
      if (side) return { relay: held.relay, side };
    }
    return null;
  }

  /**
   * A relay frame about a relay the session does not play (ended, never existed, another agent's,
   * another attempt): answered with `relay.end`, once per relay and session, and nothing else happens.
   * The answer is the same whatever the reason, so it tells a stranger nothing.
   */
  private stale(session: AgentSession, jobId: string, attempt: number): void {
    const key = `${jobId}:${attempt}`;
    let answered = this.staleAnswers.get(session);
    if (!answered) this.staleAnswers.set(session, (answered = new Set()));
    if (answered.has(key)) return;
    if (answered.size >= MAX_STALE_ANSWERS) answered.clear();
    answered.add(key);
    this.o.log.debug({ agentId: session.agent.id, jobId, attempt }, 'relay frame about a relay this agent does not play: answered with relay.end');
    session.send('relay.end', { job_id: jobId, attempt, error: `Agent ${session.agent.name} plays no relay of job ${jobId} attempt ${attempt} here` });
  }

  private ended(relay: Relay, outcome: RelayOutcome): void {
    const map = relay.role === 'host' ? this.hosted : this.served;
    const held = map.get(relay.key);
    if (held?.relay === relay) map.delete(relay.key);
    for (const end of [relay.destination, relay.source]) {
      if (!(end instanceof SessionEnd)) continue;
      const relays = this.bySession.get(end.session);
      relays?.delete(relay);
      if (relays?.size === 0) this.bySession.delete(end.session);
    }
    const error = outcome.kind === 'ended' ? outcome.notice.error : outcome.error;
    this.o.log.info({ jobId: relay.jobId, attempt: relay.attempt, role: relay.role, outcome: outcome.kind, ...(error ? { error } : {}) }, 'relay ended');
    if (relay.role !== 'host') return;
    this.o.metrics.relayEnded(outcome.kind === 'ended' && !error ? 'finished' : outcome.kind);
    if (outcome.kind === 'lost') this.act(relay, () => this.o.takeOver(relay.jobId, relay.attempt, outcome.error));
    if (outcome.kind === 'failed') this.act(relay, () => this.o.fail(relay.jobId, relay.attempt, outcome.error));
  }

  private act(relay: Relay, fn: () => Promise<unknown>): void {
    const action = fn().then(() => undefined, (err: unknown) => {
      // The lease sweeper and the destination's own report remain: the job does not stay stuck.
      this.o.log.warn({ err, jobId: relay.jobId, attempt: relay.attempt }, 'could not take over or fail a relayed job');
    });
    this.actions.add(action);
    void action.finally(() => this.actions.delete(action));
  }

  /**
   * The loop: ends relays whose run ended or changed (completed, failed, cancelled, taken over,
   * deleted; on any instance, so read from the database), and forgets expired token nonces.
   */
  private async watch(): Promise<void> {
    const now = Date.now();
    for (const [nonce, expiresAt] of this.usedNonces) if (expiresAt < now) this.usedNonces.delete(nonce);
    const held = [...this.hosted.values(), ...this.served.values()];
    if (held.length === 0) return;
    const ids = [...new Set(held.map((h) => h.relay.jobId))].map((id) => new Types.ObjectId(id));
    const docs = await this.o.db.transfers.find({ _id: { $in: ids } }, { status: 1, attempt: 1, mode: 1, agent_id: 1, source_agent_id: 1 }).lean();
    const byId = new Map(docs.map((d) => [String(d._id), d]));
    for (const h of held) {
      const doc = byId.get(h.relay.jobId);
      const error = !doc ? 'The transfer was deleted'
        : doc.status === 'cancelled' ? 'The transfer was cancelled'
          : doc.attempt !== h.relay.attempt ? `The run was taken over (attempt ${doc.attempt})`
            : doc.status !== 'in-progress' ? `The run ended (${doc.status})`
              : doc.mode !== 'relay' || String(doc.agent_id) !== h.destinationAgentId || String(doc.source_agent_id) !== h.sourceAgentId ? 'The run was taken over'
                : null;
      if (error) h.relay.end({ kind: 'stopped', error });
    }
  }
}

/** The part `session` plays in `relay`: its destination or source agent here, or none. */
function sideOf(relay: Relay, session: AgentSession): Side | null {
  if (relay.destination instanceof SessionEnd && relay.destination.session === session) return 'destination';
  if (relay.source instanceof SessionEnd && relay.source.session === session) return 'source';
  return null;
}
