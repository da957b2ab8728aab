import { decodeRelayChunk, encodeRelayChunk, type AgentMessage, type PayloadOf, type ServerToAgent } from '@xfer/shared';
import { deferred, testAgent } from './test-agent.js';
import type { AgentConnection, TestControlPlane } from './test-control-plane.js';

type RelayEnd = PayloadOf<typeof ServerToAgent, 'relay.end'>;
type Assign = PayloadOf<typeof ServerToAgent, 'job.assign'>;
type SourceRequest = PayloadOf<typeof ServerToAgent, 'relay.source'>;

/**
 * A test double of the control plane's relay forwarding (control-plane/src/plugins/app/relay/,
 * tested with real agents in e2e): on a TestControlPlane where two real agents are connected
 * with `relay: true` in their welcome, it starts a relayed job (the relayed `job.assign` to the
 * destination agent, `relay.source` to the source agent) and forwards what the contract says,
 * unchanged: `relay.credit`, `relay.want` and `relay.end` from the destination to the source,
 * `relay.entries`, `relay.end` and the binary tar frames from the source to the destination
 * (`relay.sent` is kept in `vouched`, as the control plane records it).
 * When one side's socket closes it sends the other `relay.end` with an error, as the control
 * plane does for a side that is gone.
 *
 * It counts what a real control plane checks: the byte credit the destination granted and the
 * tar bytes the source sent (`overdrawn`; `maxInFlight`: sent and not yet granted back), and
 * records the wants. Tests may
 * change a frame on its way (`tamper`) or hold the source's frames (`hold`).
 */
export class RelayForwarder {
  granted = 0;
  sent = 0;
  /** The first credit: the window the destination opened with. */
  private window: number | null = null;
  /** The most tar bytes sent and not yet granted back (consumed) by the destination at any time. */
  maxInFlight = 0;
  /** The source sent bytes beyond its credit (a control plane would end the relay). */
  overdrawn = false;
  frames = 0;
  /** The paths of every `relay.want`, in order. */
  readonly wanted: string[] = [];
  /** What the source vouched for (`relay.sent`, which a control plane records and never forwards), in order. */
  readonly vouched: { path: string; size: number; sha256: string }[] = [];
  readonly ends: { from: 'source' | 'destination'; payload: RelayEnd }[] = [];
  /** Changes one frame's payload on its way: `offset` is where it starts in the tar stream. */
  tamper: ((payload: Buffer, offset: number) => Buffer) | null = null;
  /** Frames starting at this offset of the tar stream or later are held (`hold`); `reached` resolves at the first. */
  holdFrom: number | null = null;
  readonly reached = deferred();
  private held: Buffer[] | null = null;
  private active = false;
  private jobId = '';
  private attempt = 0;

  constructor(readonly destination: AgentConnection, readonly source: AgentConnection) {
    destination.onMessage = (m) => this.fromDestination(m);
    source.onMessage = (m) => this.fromSource(m);
    source.onBinary = (data) => this.frame(data);
    destination.onBinary = () => { destination.invalid.push('the destination agent sent a binary frame'); };
    void source.closed.then(() => this.gone(this.destination, 'the source agent disconnected'));
    void destination.closed.then(() => this.gone(this.source, 'the destination agent disconnected'));
  }

  /** Starts a relayed job attempt: the destination gets `assign` (with `relay`, without `source`), the source `relay.source`. */
  start(assign: Omit<Assign, 'source' | 'relay'>, source: Omit<SourceRequest, 'job_id' | 'attempt' | 'concurrency'>): void {
    this.jobId = assign.job_id;
    this.attempt = assign.attempt;
    this.granted = 0;
    this.sent = 0;
    this.window = null;
    this.active = true;
    this.wanted.length = 0;
    this.destination.send('job.assign', { ...assign, relay: { source_type: source.source.type } });
    this.source.send('relay.source', { job_id: assign.job_id, attempt: assign.attempt, concurrency: assign.options.concurrency, ...source });
  }

  /** From now on the source's frames wait here (in order) until `release`. */
  hold(): void {
    this.held ??= [];
  }

  release(): void {
    const held = this.held ?? [];
    this.held = null;
    for (const frame of held) this.destination.ws.send(frame);
  }

  /** The source's `relay.end`, once it comes. */
  async sourceEnded(): Promise<RelayEnd> {
    return (await this.source.next('relay.end', (m) => this.mine(m.payload))).payload;
  }

  private mine(p: { job_id: string; attempt: number }): boolean {
    return p.job_id === this.jobId && p.attempt === this.attempt;
  }

  private fromDestination(m: AgentMessage): void {
    if (!m.type.startsWith('relay.') || !this.mine(m.payload as { job_id: string; attempt: number })) return;
    if (m.type === 'relay.credit') {
      this.window ??= m.payload.bytes;
      this.granted += m.payload.bytes;
    }
    if (m.type === 'relay.want') this.wanted.push(...m.payload.files.map((f) => f.path));
    if (m.type === 'relay.end') {
      this.ends.push({ from: 'destination', payload: m.payload });
      this.active = false;
    }
    if (m.type === 'relay.credit' || m.type === 'relay.want' || m.type === 'relay.end') this.source.send(m.type, m.payload as never);
  }

  private fromSource(m: AgentMessage): void {
    if (!m.type.startsWith('relay.') || !this.mine(m.payload as { job_id: string; attempt: number })) return;
    if (m.type === 'relay.end') {
      this.ends.push({ from: 'source', payload: m.payload });
      this.active = false;
    }
    if (m.type === 'relay.sent') this.vouched.push(...m.payload.files);
    if (m.type === 'relay.entries' || m.type === 'relay.end') this.destination.send(m.type, m.payload as never);
  }

  private frame(data: Buffer): void {
    const chunk = decodeRelayChunk(data);
    if (chunk.jobId !== this.jobId || chunk.attempt !== this.attempt) return;
    const offset = this.sent;
    this.frames++;
    this.sent += chunk.payload.length;
    this.maxInFlight = Math.max(this.maxInFlight, this.sent - (this.granted - (this.window ?? 0)));
    if (this.sent > this.granted) this.overdrawn = true;
    let frame = data;
    if (this.tamper) {
      const changed = this.tamper(Buffer.from(chunk.payload), offset);
      if (!changed.equals(chunk.payload)) frame = encodeRelayChunk(chunk.jobId, chunk.attempt, changed);
    }
    if (this.holdFrom !== null && offset >= this.holdFrom && !this.held) {
      this.hold();
      this.reached.resolve();
    }
    if (this.held) this.held.push(frame);
    else this.destination.ws.send(frame);
  }

  private gone(other: AgentConnection, error: string): void {
    if (!this.active) return;
    this.active = false;
    if (other.ws.readyState === other.ws.OPEN) other.send('relay.end', { job_id: this.jobId, attempt: this.attempt, error });
  }
}

/** The bytes of the tar stream the frame payload `offset…` covers, flipped at `at` (one bit): for `tamper`. */
export function flipAt(at: number): (payload: Buffer, offset: number) => Buffer {
  let done = false;
  return (payload, offset) => {
    if (done || at < offset || at >= offset + payload.length) return payload;
    done = true;
    payload[at - offset] ^= 0x01;
    return payload;
  };
}

/** Where the first wanted file's content starts in a relay's tar stream: its pax header (2 blocks) and its header. */
export const FIRST_CONTENT_OFFSET = 3 * 512;

/**
 * Two real agents on `server`, welcomed with `relay: true` (and the resume lookup), told apart by
 * their hostnames, and a forwarder between them. `options` go to both agents.
 */
export async function relayPair(server: TestControlPlane, options: { source?: Parameters<typeof testAgent>[1]; destination?: Parameters<typeof testAgent>[1] } = {}) {
  const source = testAgent(server.connectUrl, { hostname: 'source-agent', ...options.source });
  const destination = testAgent(server.connectUrl, { hostname: 'destination-agent', ...options.destination });
  const running = [source.agent.run(), destination.agent.run()];
  const conns = await Promise.all([server.connection(0), server.connection(1)]);
  const hellos = await Promise.all(conns.map((c) => c.welcome({ relay: true, verified_lookup: true })));
  const byHost = (host: string) => conns[hellos.findIndex((h) => h.payload.hostname === host)]!;
  const forwarder = new RelayForwarder(byHost('destination-agent'), byHost('source-agent'));
  return {
    source, destination, forwarder,
    async stop(): Promise<void> {
      await Promise.all([source.agent.shutdown('test', true), destination.agent.shutdown('test', true)]);
      await Promise.all(running);
    },
  };
}
