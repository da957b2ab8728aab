import type { SFTPWrapper } from 'ssh2';

/**
 * How much one file's reads keep in flight, from the path's round trip (docs/connectors.md
 * "sftp", "Long paths"). A pipeline carries at most what it has in flight per round trip, so on a
 * 50 ms path the 2 MiB that suit a LAN cap a file at 40 MB/s (measured: 20 MB/s, with ssh2's window
 * below). The depth is sized to carry `readRate` over the round trip, between `depth` requests (a
 * short path) and `maxReadInFlight` bytes: memory grows only on the paths that need it.
 */
export function readDepth(rttMs: number, tuning: { chunkBytes: number; depth: number; maxReadInFlight: number; readRate: number }): number {
  const wanted = Math.ceil((tuning.readRate * Math.max(0, rttMs)) / 1000 / tuning.chunkBytes);
  const most = Math.max(tuning.depth, Math.floor(tuning.maxReadInFlight / tuning.chunkBytes));
  return Math.min(most, Math.max(tuning.depth, wanted));
}

/** ssh2's receive window of a channel: 2 MiB, topped up once it falls to 1 MiB (lib/Channel.js, not configurable). */
export const SSH2_WINDOW_BYTES = 2 * 1024 * 1024;

/** The parts of ssh2's SFTP channel (1.x, lib/protocol/SFTP.js) that widening touches. */
interface ChannelInternals {
  incoming?: { window?: unknown };
  outgoing?: { id?: unknown; state?: unknown };
  _client?: { _protocol?: { channelWindowAdjust?: unknown } };
  push?: unknown;
}

/**
 * Keeps the receive window of an SFTP channel at `bytes` instead of ssh2's fixed 2 MiB, so that
 * reads deeper than 2 MiB (readDepth) are not held to it: the server may only send what the
 * window allows, so over a long path the window, not the requests, would set the pace.
 *
 * ssh2 lowers `incoming.window` as data arrives and, after handing it to the channel (`push`),
 * tops it up to 2 MiB once it is at 1 MiB or less. We top it up to `bytes` once it is at half of
 * that, right after the same `push`, through the same CHANNEL_WINDOW_ADJUST it sends; with the
 * window above 1 MiB, ssh2's own top-up never fires. Memory does not grow with it: an SFTP server
 * sends only answers to our requests, which readDepth bounds. Uses ssh2 1.x internals, checked
 * here (and by agent/test/sftp-long-paths.test.ts against the installed ssh2): when they are not as expected, the
 * channel keeps ssh2's window and this returns false.
 */
export function widenReceiveWindow(sftp: SFTPWrapper, bytes: number): boolean {
  if (bytes <= SSH2_WINDOW_BYTES) return false;
  const channel = sftp as unknown as ChannelInternals;
  const incoming = channel.incoming;
  const outgoing = channel.outgoing;
  const protocol = channel._client?._protocol;
  const push = channel.push;
  if (typeof incoming?.window !== 'number' || typeof outgoing?.id !== 'number' || typeof protocol?.channelWindowAdjust !== 'function' || typeof push !== 'function') return false;
  const adjust = protocol.channelWindowAdjust as (id: number, amount: number) => void;
  const topUp = () => {
    const amount = bytes - (incoming.window as number);
    if (amount <= 0 || outgoing.state === 'closed') return;
    incoming.window = (incoming.window as number) + amount;
    adjust.call(protocol, outgoing.id as number, amount);
  };
  channel.push = function widened(this: unknown, data: Buffer | null): boolean {
    const result = (push as (data: Buffer | null) => boolean).call(this, data);
    if (data !== null && (incoming.window as number) <= bytes / 2) topUp();
    return result;
  };
  topUp();
  return true;
}
