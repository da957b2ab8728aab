import { ConnectorError } from '../types.js';
import { SmbClient, type SmbTarget } from './smb.client.js';
import { connectError } from './smb.errors.js';

/**
 * The connector's one SMB session: connected on first use, shared by every operation (SMB2
 * multiplexes requests on a connection), and connected anew on the next use after the socket
 * dropped. Concurrent callers wait for the same connection attempt.
 */
export class SmbSession {
  private client: SmbClient | null = null;
  private connecting: Promise<SmbClient> | null = null;
  private closed = false;

  constructor(
    private readonly target: SmbTarget,
    private readonly where: string,
  ) {}

  /** A live client; `fresh` when this call connected it (a failure on it is not a stale connection). */
  async get(signal?: AbortSignal): Promise<{ client: SmbClient; fresh: boolean }> {
    if (this.closed) throw new ConnectorError('TRANSIENT', `smb connection to ${this.where} is closed`);
    if (this.client && !this.client.closed) return { client: this.client, fresh: false };
    this.connecting ??= SmbClient.connect(this.target)
      .then((client) => {
        // close() ran while connecting: nobody will close this one later.
        if (this.closed) client.destroy();
        else this.client = client;
        return client;
      })
      .finally(() => {
        this.connecting = null;
      });
    try {
      return { client: await abortable(this.connecting, signal), fresh: true };
    } catch (err) {
      throw connectError(err, this.where, this.target.share);
    }
  }

  close(): void {
    this.closed = true;
    this.client?.destroy();
    this.client = null;
  }
}

/** `promise`, or a rejection with the signal's reason once it aborts (the promise goes on for others). */
export function abortable<T>(promise: Promise<T>, signal?: AbortSignal): Promise<T> {
  if (!signal) return promise;
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (e) => {
        signal.removeEventListener('abort', onAbort);
        reject(e);
      },
    );
  });
}
