import { timingSafeEqual } from 'node:crypto';
import type { ConnectionOptions, TLSSocket } from 'node:tls';
import { Client } from 'basic-ftp';
import { isIP } from 'node:net';
import type { NetworkGuard } from '../network-guard.js';
import { ConnectorError } from '../types.js';
import type { FtpEndpoint, FtpTuning } from './ftp.config.js';
import { connectError, replyCode } from './ftp.errors.js';

/** A client lent by the pool; give it back with `release` exactly once. */
export interface FtpLease {
  client: Client;
  /** Logged in for this lease (not taken from the idle ones, which the server may have dropped). */
  fresh: boolean;
  /** Returns the client; a closed or `broken` one (a transfer cut short) is dropped instead. */
  release(broken?: boolean): void;
}

/**
 * A few logged-in basic-ftp clients. FTP runs one command at a time per control connection, so
 * parallel operations each take a client of their own; up to `tuning.connections` exist, the
 * rest wait. A client that failed or was closed under an abort is dropped and replaced on demand.
 */
export class FtpPool {
  private readonly idle: Client[] = [];
  private readonly waiters: (() => void)[] = [];
  private open = 0;
  private closed = false;
  /** What test() reports about TLS, from the last login. */
  tlsSummary = '';
  /** The server's FEAT answer (command → parameters), from the first login; `onFeatures` hears it. */
  features: Map<string, string> | undefined;
  onFeatures: ((features: Map<string, string>) => void) | undefined;

  constructor(
    private readonly endpoint: FtpEndpoint,
    private readonly tuning: FtpTuning,
    /** The agent's allow/deny lists: the control connection goes only to addresses it checked. */
    private readonly guard: NetworkGuard,
  ) {}

  async acquire(signal?: AbortSignal): Promise<FtpLease> {
    for (;;) {
      if (signal?.aborted) throw new ConnectorError('TRANSIENT', `connecting to ${this.endpoint.where}: aborted`, { cause: signal.reason });
      if (this.closed) throw new ConnectorError('TRANSIENT', 'the ftp connector is closed');
      const idle = this.idle.pop();
      if (idle) {
        if (!idle.closed) return this.lease(idle, false);
        this.open--;
        continue;
      }
      if (this.open < this.tuning.connections) {
        this.open++;
        try {
          return this.lease(await this.connect(signal), true);
        } catch (err) {
          this.open--;
          this.wakeOne();
          throw err;
        }
      }
      await this.waitForRelease(signal);
    }
  }

  /** Closes the idle clients: after one turned out dropped by the server, the others (as old) likely were too. */
  discardIdle(): void {
    for (const client of this.idle.splice(0)) {
      client.close();
      this.open--;
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const client of this.idle.splice(0)) client.close();
    for (const wake of this.waiters.splice(0)) wake();
  }

  private lease(client: Client, fresh: boolean): FtpLease {
    let released = false;
    return {
      client,
      fresh,
      release: (broken = false) => {
        if (released) return;
        released = true;
        if (broken || client.closed || this.closed) {
          client.close();
          this.open--;
        } else this.idle.push(client);
        this.wakeOne();
      },
    };
  }

  private wakeOne(): void {
    this.waiters.shift()?.();
  }

  private waitForRelease(signal: AbortSignal | undefined): Promise<void> {
    return new Promise<void>((resolve) => {
      const wake = () => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      };
      // The loop in acquire() sees the abort and throws.
      const onAbort = () => {
        const i = this.waiters.indexOf(wake);
        if (i >= 0) this.waiters.splice(i, 1);
        resolve();
      };
      this.waiters.push(wake);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** Connects, secures (explicit or implicit TLS), checks a pinned certificate, then logs in. */
  private async connect(signal: AbortSignal | undefined): Promise<Client> {
    const { host, port, user, password, security, pin, where } = this.endpoint;
    const client = new Client(this.tuning.timeoutMs);
    const onAbort = () => client.close();
    signal?.addEventListener('abort', onAbort, { once: true });
    // A pinned certificate is checked below, before the credentials go out; otherwise the usual
    // chain and name checks, against the host name (the socket goes to a checked address).
    const tls: ConnectionOptions = { rejectUnauthorized: pin === null, ...(isIP(host) ? {} : { servername: host }) };
    try {
      await this.dial(client, host, port, tls, signal);
      if (security === 'explicit') {
        try {
          await client.useTLS(tls);
        } catch (err) {
          if (replyCode(err) === undefined) throw err;
          throw new ConnectorError('UNSUPPORTED', `connecting to ${where}: the server refused AUTH TLS (${(err as Error).message.trim()}); set options.secure to none for plain FTP`, { cause: err });
        }
      }
      if (security !== 'none') this.tlsSummary = this.checkCertificate(client.ftp.socket as TLSSocket);
      else this.tlsSummary = 'plain FTP, no TLS';
      // Before login, so that a non-ASCII user name or password reaches the server as UTF-8.
      await client.sendIgnoringError('OPTS UTF8 ON');
      await client.login(user, password);
      await client.useDefaultSettings();
      if (!this.features) {
        this.features = await client.features();
        this.onFeatures?.(this.features);
      }
      return client;
    } catch (err) {
      client.close();
      if (signal?.aborted) throw new ConnectorError('TRANSIENT', `connecting to ${where}: aborted`, { cause: err });
      throw connectError(err, where);
    } finally {
      signal?.removeEventListener('abort', onAbort);
    }
  }

  /**
   * Connects the control connection to the first address of `host` that answers, every one of
   * them checked by the guard first (basic-ftp takes a host and no lookup function). Data
   * connections go to the control connection's address (basic-ftp's default refuses a PASV reply
   * naming another host), so they reach only a checked address too.
   */
  private async dial(client: Client, host: string, port: number, tls: ConnectionOptions, signal: AbortSignal | undefined): Promise<void> {
    const addresses = await this.guard.resolve(host);
    for (let i = 0; ; i++) {
      // An abort while resolving closed no socket yet: stop before opening one.
      if (signal?.aborted) throw new ConnectorError('TRANSIENT', `connecting to ${this.endpoint.where}: aborted`, { cause: signal.reason });
      const { address } = addresses[i]!;
      try {
        if (this.endpoint.security === 'implicit') await client.connectImplicitTLS(address, port, { ...tls });
        else await client.connect(address, port);
        return;
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (i + 1 >= addresses.length || !['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'EADDRNOTAVAIL'].includes(code ?? '')) throw err;
      }
    }
  }

  private checkCertificate(socket: TLSSocket): string {
    const presented = socket.getPeerCertificate?.()?.fingerprint256 ?? '';
    const mode = this.endpoint.security === 'implicit' ? 'implicit TLS' : 'explicit TLS (AUTH TLS)';
    if (this.endpoint.pin === null) return `${mode}, certificate verified`;
    const digest = Buffer.from(presented.replace(/:/g, ''), 'hex');
    if (digest.length !== 32 || !timingSafeEqual(digest, this.endpoint.pin)) {
      throw new ConnectorError('AUTH', `connecting to ${this.endpoint.where}: TLS certificate mismatch: the server presented ${presented || 'none'}, not the pinned options.tls_cert_sha256`);
    }
    return `${mode}, certificate ${presented} matches the pinned one`;
  }
}
