import { encodeRelayChunk, decodeRelayChunk, MAX_RELAY_ENTRIES, RELAY_WINDOW_BYTES } from '@xfer/shared';
import type { AgentRelayMessage, Sent } from '../agents/index.js';
import { DATA_PIPE_BYTES, Pipe, PIPE_FRAMES, type Farewell, type Forwarded, type RelayEnd } from './ends.js';
import { LinkCloseCodes } from './peer-link.js';
import { Relay, type RelayOutcome } from './relay.js';

/**
 * The relay's own logic, without sockets: credit accounting, what is held in flight, what each
 * side is told at the end. A fake end stands in for an agent's session or a link (test code: no
 * real server is involved here; test/relay.test.ts and test/relay-peer.test.ts run the real ones).
 */
class FakeEnd implements RelayEnd {
  readonly sent: Array<[string, unknown]> = [];
  readonly binaries: Buffer[] = [];
  /** Send callbacks not yet called: what the "operating system" has not taken yet. */
  readonly pending: Sent[] = [];
  readonly holds = new Set<string>();
  farewell: Farewell | null = null;
  /** Take every send at once (a side that reads). */
  constructor(readonly label: string, private readonly reads = true) {}

  send<T extends keyof Forwarded>(type: T, payload: Forwarded[T], sent: Sent): boolean {
    this.sent.push([type, payload]);
    this.take(sent);
    return true;
  }

  sendBinary(frame: Buffer, sent: Sent): boolean {
    this.binaries.push(frame);
    this.take(sent);
    return true;
  }

  hold(reason: string): void {
    this.holds.add(reason);
  }

  release(reason: string): void {
    this.holds.delete(reason);
  }

  finish(farewell: Farewell): void {
    this.farewell = farewell;
  }

  drain(): void {
    for (const sent of this.pending.splice(0)) sent();
  }

  private take(sent: Sent): void {
    if (this.reads) sent();
    else this.pending.push(sent);
  }
}

const JOB = 'ab'.repeat(12);
const ref = { job_id: JOB, attempt: 3 };
const msg = <T extends AgentRelayMessage['type']>(type: T, payload: Extract<AgentRelayMessage, { type: T }>['payload']) => ({ type, payload }) as AgentRelayMessage;
const chunk = (size: number) => {
  const frame = encodeRelayChunk(JOB, 3, Buffer.alloc(size, 7));
  return [decodeRelayChunk(frame), frame] as const;
};

function relay(role: 'host' | 'peer' = 'host', reads = true) {
  const outcomes: RelayOutcome[] = [];
  let forwarded = 0;
  const r = new Relay({ jobId: JOB, attempt: 3, role, onEnd: (_r, o) => outcomes.push(o), forwarded: (n) => (forwarded += n) });
  const destination = new FakeEnd('agent D', reads);
  const source = new FakeEnd('agent S');
  r.attachDestination(destination);
  return { r, destination, source, outcomes, forwarded: () => forwarded };
}

test('credit granted before the source is ready follows it in one relay.credit, after which credit is passed on as granted', () => {
  const { r, source } = relay();
  r.fromDestination(msg('relay.credit', { ...ref, entries: 10, bytes: 100 }));
  r.fromDestination(msg('relay.credit', { ...ref, entries: 5, bytes: 50 }));
  r.attachSource(source);
  expect(source.sent).toEqual([['relay.credit', { ...ref, entries: 15, bytes: 150 }]]);
  r.fromDestination(msg('relay.credit', { ...ref, entries: 0, bytes: 7 }));
  expect(source.sent[1]).toEqual(['relay.credit', { ...ref, entries: 0, bytes: 7 }]);
});

test('the source may send exactly what was granted; one byte or entry more ends the relay as failed, telling both', () => {
  const bytes = relay();
  bytes.r.attachSource(bytes.source);
  bytes.r.fromDestination(msg('relay.credit', { ...ref, entries: 0, bytes: 100 }));
  bytes.r.fromSourceBinary(...chunk(60));
  bytes.r.fromSourceBinary(...chunk(40));
  expect(bytes.destination.binaries).toHaveLength(2);
  expect(bytes.forwarded()).toBe(100);
  bytes.r.fromSourceBinary(...chunk(1));
  expect(bytes.destination.binaries).toHaveLength(2);
  const error = 'Relay source agent S sent 1 bytes more than the destination granted';
  expect(bytes.outcomes).toEqual([{ kind: 'failed', side: 'source', error }]);
  for (const end of [bytes.destination, bytes.source]) expect(end.farewell).toEqual({ notice: { ...ref, error }, code: LinkCloseCodes.normal, reason: error });

  const entries = relay();
  entries.r.attachSource(entries.source);
  entries.r.fromDestination(msg('relay.credit', { ...ref, entries: 2, bytes: 0 }));
  entries.r.fromSource(msg('relay.entries', { ...ref, entries: [{ path: 'a', kind: 'file', size: 1 }, { path: 'b', kind: 'file', size: 1 }], done: false }));
  entries.r.fromSource(msg('relay.entries', { ...ref, entries: [{ path: 'c', kind: 'file', size: 1 }], done: true }));
  expect(entries.destination.sent).toHaveLength(1);
  expect(entries.outcomes[0]).toMatchObject({ kind: 'failed', side: 'source' });
});

test('what was received frees window: the destination may keep the window outstanding, never more', () => {
  const { r, source, outcomes } = relay();
  r.attachSource(source);
  r.fromDestination(msg('relay.credit', { ...ref, entries: MAX_RELAY_ENTRIES, bytes: RELAY_WINDOW_BYTES }));
  r.fromSourceBinary(...chunk(1000));
  r.fromDestination(msg('relay.credit', { ...ref, entries: 0, bytes: 1000 }));
  expect(outcomes).toEqual([]);
  r.fromDestination(msg('relay.credit', { ...ref, entries: 0, bytes: 1 }));
  expect(outcomes[0]).toMatchObject({ kind: 'failed', side: 'destination', error: expect.stringMatching(/granted more credit than the relay window/) });
});

test('roles are checked: wants before any listing, or source messages from the destination, break the relay', () => {
  const early = relay();
  early.r.fromDestination(msg('relay.want', { ...ref, files: [{ path: 'a', size: 1 }] }));
  expect(early.outcomes[0]).toMatchObject({ kind: 'failed', side: 'destination', error: 'Relay destination agent D wanted files before the source listed any' });
  const confused = relay();
  confused.r.attachSource(confused.source);
  confused.r.fromDestination(msg('relay.entries', { ...ref, entries: [], done: true }));
  expect(confused.outcomes[0]).toMatchObject({ kind: 'failed', side: 'destination' });
});

test('a destination that does not read: the source is held past the pipe\'s bytes or frames, and released at half', () => {
  const { r, destination, source } = relay('host', false);
  r.attachSource(source);
  r.fromDestination(msg('relay.credit', { ...ref, entries: 0, bytes: RELAY_WINDOW_BYTES }));
  // Tiny frames: the frame count holds the source long before the bytes would.
  for (let i = 0; i <= PIPE_FRAMES; i++) r.fromSourceBinary(...chunk(1));
  expect(source.holds.size).toBe(1);
  expect(r.framesInFlight).toBe(PIPE_FRAMES + 1);
  destination.pending.splice(0, PIPE_FRAMES / 2).forEach((sent) => sent());
  expect(source.holds.size).toBe(1);
  destination.pending.shift()!();
  expect(source.holds.size).toBe(0);
  destination.drain();
  expect(r.inFlight).toBe(0);
});

test('a pipe holds its origin once, past either bound, until half is out', () => {
  const origin = new FakeEnd('o');
  const pipe = new Pipe('p', 100, 10);
  const sends = [pipe.carry(origin, 60), pipe.carry(origin, 60)];
  expect(origin.holds).toEqual(new Set(['p']));
  sends[0]!();
  sends[0]!(); // a callback called twice counts once
  expect(pipe.inFlight).toBe(60);
  expect(origin.holds.size).toBe(1);
  sends[1]!();
  expect(origin.holds.size).toBe(0);
  expect(DATA_PIPE_BYTES).toBeGreaterThan(RELAY_WINDOW_BYTES);
});

test('what each side is told: the side that ended or was lost nothing; on a peer, the link to the host a close code that decides the job', () => {
  const ended = relay();
  ended.r.attachSource(ended.source);
  ended.r.fromDestination(msg('relay.end', ref));
  expect(ended.source.farewell).toEqual({ notice: ref, code: LinkCloseCodes.normal, reason: 'relay ended' });
  expect(ended.destination.farewell).toMatchObject({ notice: null, code: LinkCloseCodes.normal });
  expect(ended.outcomes).toEqual([{ kind: 'ended', by: 'destination', notice: ref }]);

  const lost = relay('peer');
  lost.r.attachSource(lost.source);
  lost.r.end({ kind: 'lost', side: 'source', error: 'Relay source agent S disconnected' });
  expect(lost.source.farewell).toMatchObject({ notice: null });
  expect(lost.destination.farewell).toEqual({ notice: { ...ref, error: 'Relay source agent S disconnected' }, code: LinkCloseCodes.lost, reason: 'Relay source agent S disconnected' });

  const failed = relay('peer');
  failed.r.attachSource(failed.source);
  failed.r.end({ kind: 'failed', side: 'source', error: 'broken' });
  expect(failed.destination.farewell).toMatchObject({ code: LinkCloseCodes.failed });

  // Ending twice changes nothing; a source attached after the end is told at once.
  const late = relay();
  late.r.end({ kind: 'stopped', error: 'The transfer was cancelled' });
  late.r.end({ kind: 'lost', side: 'destination', error: 'x' });
  expect(late.outcomes).toHaveLength(1);
  late.r.attachSource(late.source);
  expect(late.source.farewell).toEqual({ notice: { ...ref, error: 'The transfer was cancelled' }, code: LinkCloseCodes.normal, reason: 'The transfer was cancelled' });
});
