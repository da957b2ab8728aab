import ssh2, { type Client, type SFTPWrapper } from 'ssh2';
import type { Socket } from 'node:net';
import type { NetworkGuard } from '../network-guard.js';
import { ConnectorError } from '../types.js';
import type { HostKeySeen, SftpEndpoint, SftpTuning } from './sftp.config.js';
import { connectError } from './sftp.errors.js';

/** One SFTP channel lent to an operation; `release` gives it back (idempotent). */
export interface SftpLease {
  sftp: SFTPWrapper;
  release(): void;
}

interface Channel {
  sftp: SFTPWrapper;
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
 * One SSH connection per connector, opened on first use and again after it drops, with up to
 * `tuning.channels` SFTP channels. Each channel is its own sftp-server process on the server, so
 * parallel operations (the engine copies several files at once) do not queue behind each other;
 * within a channel, requests are pipelined (see sftp.streams.ts).
 */
export class SftpSession {
  private link: Promise<Link> | undefined;
  private closed = false;
  /** `SHA256:...` of the host key of the last handshake. */
  hostKeyFingerprint: string | undefined;

  constructor(
    private readonly endpoint: SftpEndpoint,
    private readonly tuning: SftpTuning,
    /** Every connection goes through it (the agent's allow/deny lists). */
    private readonly guard: NetworkGuard,
  ) {}

  /** A channel for one operation, connecting first when needed. Release it when done. */
  async acquire(signal?: AbortSignal): Promise<SftpLease> {
    for (let attempt = 1; ; attempt++) {
      if (this.closed) throw new ConnectorError('TRANSIENT', `the connection to ${this.endpoint.where} is closed`);
      const link = await abortable(this.connection(), signal, this.endpoint.where);
      try {
        const channel = await abortable(this.pick(link), signal, this.endpoint.where);
        channel.load++;
        let released = false;
        return {
          sftp: channel.sftp,
          release: () => {
            if (released) return;
            released = true;
            channel.load--;
          },
        };
      } catch (err) {
        // The connection dropped between handshake and channel: one fresh connection, then give up.
        if (!link.closed || attempt > 1) throw err;
      }
    }
  }

  /** Connects (once) and resolves when authenticated; rejects with AUTH, TRANSIENT... and a clear message. */
  async connect(signal?: AbortSignal): Promise<void> {
    await abortable(this.connection(), signal, this.endpoint.where);
  }

  async close(): Promise<void> {
    this.closed = true;
    const link = this.link;
    this.link = undefined;
    if (!link) return;
    try {
      const { client } = await link;
      await new Promise<void>((resolve) => {
        client.once('close', () => resolve());
        client.end();
      });
    } catch {
      // never connected: nothing to close
    }
  }

  private connection(): Promise<Link> {
    const current = this.link;
    if (current) return current;
    const opening = this.open();
    this.link = opening;
    opening.then(
      (link) => link.client.once('close', () => this.link === opening && (this.link = undefined)),
      () => this.link === opening && (this.link = undefined),
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

  /** The least loaded open channel, or a new one while there are fewer than `tuning.channels` and all are busy. */
  private async pick(link: Link): Promise<Channel> {
    link.channels = link.channels.filter((c) => c.open);
    let best: Channel | undefined;
    for (const channel of link.channels) if (!best || channel.load < best.load) best = channel;
    if (best && (best.load === 0 || link.channels.length >= this.tuning.channels)) return best;
    link.opening ??= this.openChannel(link).finally(() => (link.opening = null));
    try {
      return await link.opening;
    } catch (err) {
      // The server may allow fewer sessions than we would like (MaxSessions): share what is open.
      if (best?.open) return best;
      throw err;
    }
  }

  private openChannel(link: Link): Promise<Channel> {
    return new Promise<Channel>((resolve, reject) => {
      if (link.closed) {
        reject(new ConnectorError('TRANSIENT', `the connection to ${this.endpoint.where} was lost`));
        return;
      }
      link.client.sftp((err, sftp) => {
        if (err) {
          reject(new ConnectorError('TRANSIENT', `opening an SFTP channel to ${this.endpoint.where}: ${err.message}`, { cause: err }));
          return;
        }
        const channel: Channel = { sftp, load: 0, open: true };
        sftp.on('error', () => (channel.open = false));
        sftp.once('close', () => (channel.open = false));
        link.channels.push(channel);
        resolve(channel);
      });
    });
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

