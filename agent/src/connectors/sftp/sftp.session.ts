import ssh2, { type Client, type SFTPWrapper } from 'ssh2';
import type { Socket } from 'node:net';
import type { NetworkGuard } from '../network-guard.js';
import { ConnectorError } from '../types.js';
import type { HostKeySeen, SftpEndpoint, SftpTuning } from './sftp.config.js';
import { connectError } from './sftp.errors.js';
import { readDepth as sftpReadDepth, widenReceiveWindow } from './sftp.window.js';

/** One SFTP channel lent to an operation; `release` gives it back (idempotent). */
export interface SftpLease {
  sftp: SFTPWrapper;
  /** READ requests one file keeps in flight on this channel: sized to its path (sftp.window.ts). */
  readDepth: number;
  release(): void;
}

interface Channel {
  sftp: SFTPWrapper;
  readDepth: number;
  /** Operations using it now: new ones go to the least loaded channel. */
  load: number;
  open: boolean;
}

/** One SSH connection and its SFTP channels. */
interface Link {
  client: Client;
  channels: Channel[];
  opening: Promise<Channel> | null;
  closed: boolean;
  hostKey: HostKeySeen;
}

/**
 * Up to `tuning.connections` SSH connections per connector, each with up to `tuning.channels` SFTP
 * channels (docs/connectors.md "sftp"). Each channel is its own sftp-server process on the server,
 * so parallel operations (the engine copies several files at once, a large file is read in several
 * ranges) do not queue behind each other; within a channel, requests are pipelined (see
 * sftp.streams.ts). An operation takes an idle channel if there is one; else a new connection,
 * while there are fewer than `connections`; else a new channel on the least loaded connection;
 * else the least loaded channel. Connections come before channels because a TCP connection is
 * what a long path limits: over a 50 ms round trip one connection carried 32 MB/s whatever was in
 * flight, two carried twice that (bench/transfer-matrix.mjs --wan), and GridFTP, Globus and
 * Aspera use parallel connections for the same reason. A server that refuses another connection
 * (MaxStartups, a per-user session limit) is not asked again: the open ones are shared.
 */
export class SftpSession {
  private links: Link[] = [];
  /** Connections being opened now (several at once when a burst of operations finds all busy). */
  private readonly opening = new Set<Promise<Link>>();
  /** Lowered to what is open when the server refuses one more. */
  private maxLinks: number;
  private closed = false;
  /** `SHA256:...` of the host key of the last handshake. */
  hostKeyFingerprint: string | undefined;

  constructor(
    private readonly endpoint: SftpEndpoint,
    private readonly tuning: SftpTuning,
    /** Every connection goes through it (the agent's allow/deny lists). */
    private readonly guard: NetworkGuard,
  ) {
    this.maxLinks = Math.max(1, tuning.connections);
  }

  /** A channel for one operation, connecting first when needed. Release it when done. */
  async acquire(signal?: AbortSignal): Promise<SftpLease> {
    for (let attempt = 1; ; attempt++) {
      if (this.closed) throw new ConnectorError('TRANSIENT', `the connection to ${this.endpoint.where} is closed`);
      const picking = this.pick();
      let channel: Channel;
      try {
        channel = await abortable(picking, signal, this.endpoint.where);
      } catch (err) {
        // Aborted while a connection or channel opens: what it counts when it comes is given back.
        picking.then((taken) => taken.load--, () => undefined);
        // The connection dropped between handshake and channel: one fresh connection, then give up.
        if (err instanceof LinkLost && attempt === 1) continue;
        throw err instanceof LinkLost ? err.error : err;
      }
      let released = false;
      return {
        sftp: channel.sftp,
        readDepth: channel.readDepth,
        release: () => {
          if (released) return;
          released = true;
          channel.load--;
        },
      };
    }
  }

  /** Connects (once) and resolves when authenticated; rejects with AUTH, TRANSIENT... and a clear message. */
  async connect(signal?: AbortSignal): Promise<void> {
    const live = this.live();
    if (live.length > 0) return;
    await abortable(this.opening.size > 0 ? Promise.race(this.opening) : this.openLink(), signal, this.endpoint.where);
  }

  async close(): Promise<void> {
    this.closed = true;
    const links = [...this.links, ...(await Promise.allSettled(this.opening)).flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []))];
    this.links = [];
    await Promise.all([...new Set(links)].map((link) => new Promise<void>((resolve) => {
      if (link.closed) return resolve();
      link.client.once('close', () => resolve());
      link.client.end();
    })));
  }

  private live(): Link[] {
    this.links = this.links.filter((link) => !link.closed);
    return this.links;
  }

  /**
   * The channel for the next operation, by the rule in the class comment, with its load already
   * counted: operations started in the same turn see each other's choice (counted later, a burst
   * would all pick the same idle channel).
   */
  private async pick(): Promise<Channel> {
    const take = (channel: Channel) => {
      channel.load++;
      return channel;
    };
    const links = this.live();
    let best: Channel | undefined;
    for (const link of links) {
      link.channels = link.channels.filter((c) => c.open);
      for (const channel of link.channels) if (!best || channel.load < best.load) best = channel;
    }
    if (best?.load === 0) return take(best);
    if (links.length + this.opening.size < this.maxLinks) {
      let link: Link;
      try {
        link = await this.openLink();
      } catch (err) {
        // The first connection's failure is the operation's; a further one's means "no more".
        if (this.live().length === 0) throw err;
        this.maxLinks = Math.max(1, this.live().length);
        return this.pick();
      }
      return take(await this.channelOn(link, undefined));
    }
    if (links.length === 0) {
      // Every allowed connection is still opening: the first to be ready serves.
      return take(await this.channelOn(await Promise.race(this.opening), undefined));
    }
    // A new channel on the least loaded connection that has room, else the least loaded channel.
    const loadOf = (link: Link) => link.channels.reduce((sum, c) => sum + c.load, 0);
    // One that is opening a channel already comes last: that channel is another operation's.
    const roomy = links.filter((link) => link.channels.length < this.tuning.channels)
      .sort((a, b) => Number(Boolean(a.opening)) - Number(Boolean(b.opening)) || loadOf(a) - loadOf(b))[0];
    if (roomy && (!roomy.opening || !best)) return take(await this.channelOn(roomy, best));
    return take(best!);
  }

  /** A new channel on `link` (one at a time per connection); on refusal (MaxSessions) `fallback`, the one to share. */
  private async channelOn(link: Link, fallback: Channel | undefined): Promise<Channel> {
    link.opening ??= this.openChannel(link).finally(() => (link.opening = null));
    try {
      return await link.opening;
    } catch (err) {
      if (fallback?.open) return fallback;
      const other = link.channels.find((c) => c.open);
      if (other) return other;
      throw link.closed ? new LinkLost(err) : err;
    }
  }

  private openLink(): Promise<Link> {
    const opening = this.open();
    this.opening.add(opening);
    opening.then(
      (link) => {
        this.opening.delete(opening);
        if (this.closed) link.client.end();
        else this.links.push(link);
      },
      () => this.opening.delete(opening),
    );
    return opening;
  }

  private open(): Promise<Link> {
    const { where } = this.endpoint;
    return new Promise<Link>((resolve, reject) => {
      const client = new ssh2.Client();
      const hostKey: HostKeySeen = {};
      const config = this.endpoint.connectConfig(hostKey);
      // Our own socket (ssh2 waits for it to connect and reports its errors as its own), for two
      // settings ssh2 does not make: no Nagle, and one write(2) per loop turn instead of one per packet.
      config.sock = batchedWrites(this.guard.connect({ host: config.host!, port: config.port! }));
      const link: Link = { client, channels: [], opening: null, closed: false, hostKey };
      let settled = false;
      const fail = (err: ConnectorError) => {
        if (settled) return;
        settled = true;
        reject(err);
        client.end();
      };
      client.once('ready', () => {
        settled = true;
        this.hostKeyFingerprint = hostKey.fingerprint;
        resolve(link);
      });
      // After the handshake, errors surface on the requests that were pending; 'close' follows.
      client.on('error', (err) => {
        if (hostKey.mismatch) {
          fail(new ConnectorError('AUTH', `host key mismatch for ${where}: the server presented ${hostKey.fingerprint}, which is not the pinned options.host_key_sha256`, { cause: err }));
        } else fail(connectError(err, where));
      });
      client.on('keyboard-interactive', (_name, _instructions, _lang, prompts, finish) => {
        finish(prompts.map(() => config.password ?? ''));
      });
      client.once('close', () => {
        link.closed = true;
        for (const channel of link.channels) channel.open = false;
        fail(new ConnectorError('TRANSIENT', `connecting to ${where}: the server closed the connection during the handshake`));
      });
      client.connect(config);
    });
  }

  private openChannel(link: Link): Promise<Channel> {
    return new Promise<Channel>((resolve, reject) => {
      if (link.closed) {
        reject(new ConnectorError('TRANSIENT', `the connection to ${this.endpoint.where} was lost`));
        return;
      }
      const started = performance.now();
      link.client.sftp((err, sftp) => {
        if (err) {
          reject(new ConnectorError('TRANSIENT', `opening an SFTP channel to ${this.endpoint.where}: ${err.message}`, { cause: err }));
          return;
        }
        // Opening took three round trips (channel open, subsystem request, SFTP version): a third
        // of it is the path's round trip, as the reads on it will see it (an overestimate on a
        // busy machine costs only memory, bounded by maxReadInFlight).
        const readDepth = sftpReadDepth((performance.now() - started) / 3, this.tuning);
        widenReceiveWindow(sftp, readDepth * this.tuning.chunkBytes);
        const channel: Channel = { sftp, readDepth, load: 0, open: true };
        sftp.on('error', () => (channel.open = false));
        sftp.once('close', () => (channel.open = false));
        link.channels.push(channel);
        resolve(channel);
      });
    });
  }
}

/** A channel could not be opened because its connection dropped: `acquire` tries once more. */
class LinkLost extends Error {
  constructor(readonly error: unknown) {
    super('the connection was lost');
  }
}

/** `promise`, or a TRANSIENT "aborted" rejection as soon as `signal` aborts (the work itself goes on). */
export function abortable<T>(promise: Promise<T>, signal: AbortSignal | undefined, what: string): Promise<T> {
  if (!signal) return promise;
  if (signal.aborted) return Promise.reject(new ConnectorError('TRANSIENT', `${what}: aborted`, { cause: signal.reason }));
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(new ConnectorError('TRANSIENT', `${what}: aborted`, { cause: signal.reason }));
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (err: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(err);
      },
    );
  });
}

/**
 * `sock` without Nagle's algorithm, its writes of one turn of the event loop sent together
 * (uncorked from setImmediate: later than the end of the tick, so the requests of every file
 * woken by the same batch of answers share the write; 10% less time on many small files). SFTP requests are small
 * packets sent while answers still arrive: with Nagle each could wait for an ACK, and pipelined
 * reads fell to a tenth of the speed at some depths (OpenSSH's own client turns Nagle off too).
 * ssh2 writes every SSH packet on its own, so a file's requests (open; fstat with the first read;
 * close) and those of the files started with it were one write(2) each: over loopback, where a
 * write runs the receiver's side of TCP too, the agent's largest cost on small files.
 */
function batchedWrites(sock: Socket): Socket {
  sock.setNoDelay(true);
  const write = sock.write.bind(sock) as (...args: unknown[]) => boolean;
  let corked = false;
  sock.write = ((...args: unknown[]) => {
    if (!corked) {
      corked = true;
      sock.cork();
      setImmediate(() => {
        corked = false;
        sock.uncork();
      });
    }
    return write(...args);
  }) as typeof sock.write;
  return sock;
}

