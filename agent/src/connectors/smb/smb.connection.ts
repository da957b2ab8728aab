import { createHmac, timingSafeEqual } from 'node:crypto';
import type { Socket } from 'node:net';
import { closedAccess } from '../access.js';
import type { NetworkGuard } from '../network-guard.js';
import { aesCmac, aesGmac } from './smb.crypto.js';
import { COMMAND_NAMES, Command, Dialect, Flags, HEADER_BYTES, PROTOCOL_ID, SmbStatusError, Status, TRANSFORM_ID } from './smb.protocol.js';

/** One answered request: the whole response message (header included) and its status. */
export interface SmbResponse {
  status: number;
  /** The response message, header first (offsets in SMB2 bodies count from the header's start). */
  msg: Buffer;
  sessionId: bigint;
}

export interface RequestOptions {
  /** Credits (and message ids) the request takes: ceil(payload / 64 KiB) on 2.1+, else 1. */
  charge?: number;
  /** Statuses that resolve instead of rejecting (besides SUCCESS). */
  ok?: readonly number[];
  signal?: AbortSignal;
  treeId?: number;
  /** Sign this request (and require a signed answer) even before signing is switched on for all. */
  sign?: boolean;
  /** Sees the request as sent (header first), before any answer can arrive: 3.1.1's pre-auth hash. */
  sent?: (msg: Buffer) => void;
}

interface Pending {
  command: number;
  ok: readonly number[];
  resolve: (r: SmbResponse) => void;
  reject: (e: Error) => void;
  timer: NodeJS.Timeout;
  /** Abandoned by its caller (aborted): the answer still grants credits, then is dropped. */
  abandoned: boolean;
  expectSigned: boolean;
}

export type SigningAlgorithm = 'hmac-sha256' | 'aes-cmac' | 'aes-gmac';

/** The connection was lost, or a response broke the protocol: everything on it fails. */
export class SmbConnectionError extends Error {
  constructor(message: string, readonly code?: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'SmbConnectionError';
  }
}

/** Most credits the client asks to hold: enough for many 1 MiB reads and writes in flight. */
const CREDIT_TARGET = 512;

/**
 * One SMB2 TCP connection (Direct TCP transport, port 445 style): frames messages, numbers them
 * with message ids, spends and collects credits, signs requests and verifies signed responses,
 * and matches responses to requests — including async ones, whose interim STATUS_PENDING answer
 * only announces the final response with the same MessageId (MS-SMB2 3.2.5.1.5). Requests run
 * concurrently; responses may arrive in any order.
 */
export class SmbConnection {
  dialect = 0;
  sessionId = 0n;
  signingKey: Buffer | null = null;
  signingAlgorithm: SigningAlgorithm = 'hmac-sha256';
  /** Sign every request from now on (set once the session is established with a key). */
  signAll = false;
  largeMtu = false;
  closed = false;
  /** Interim STATUS_PENDING answers seen (tests prove the async path ran). */
  interimResponses = 0;
  private credits = 1;
  private nextMessageId = 0;
  private readonly pending = new Map<number, Pending>();
  private readonly creditWaiters: { charge: number; go: () => void; fail: (e: Error) => void }[] = [];
  private readonly chunks: Buffer[] = [];
  private buffered = 0;
  private failure: Error | null = null;
  private readonly closeListeners: (() => void)[] = [];

  private constructor(
    private readonly socket: Socket,
    private readonly timeoutMs: number,
  ) {
    socket.setNoDelay(true);
    socket.on('data', (data: Buffer) => this.onData(data));
    socket.on('error', (err: NodeJS.ErrnoException) => this.fail(new SmbConnectionError(err.message, err.code, { cause: err })));
    socket.on('close', () => this.fail(new SmbConnectionError('connection closed by the server', 'EPIPE')));
  }

  /** Opens the TCP connection; rejects with the socket's error (ECONNREFUSED, ENOTFOUND, ...). */
  static open(host: string, port: number, timeoutMs: number, signal?: AbortSignal, guard: NetworkGuard = closedAccess().network): Promise<SmbConnection> {
    return new Promise((resolve, reject) => {
      const socket = guard.connect({ host, port });
      const timer = setTimeout(() => socket.destroy(Object.assign(new Error('timed out'), { code: 'ETIMEDOUT' })), timeoutMs);
      const onAbort = () => socket.destroy(signal!.reason instanceof Error ? signal!.reason : new Error('aborted'));
      signal?.addEventListener('abort', onAbort, { once: true });
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
      };
      socket.once('connect', () => {
        done();
        socket.removeAllListeners('error');
        resolve(new SmbConnection(socket, timeoutMs));
      });
      socket.once('error', (err) => {
        done();
        reject(err);
      });
    });
  }

  onClose(listener: () => void): void {
    this.closeListeners.push(listener);
  }

  /**
   * Sends one request (`body` follows the 64-byte header) and resolves with its final response.
   * A status other than SUCCESS (and `ok`) rejects with SmbStatusError.
   */
  async request(command: number, body: Buffer, opts: RequestOptions = {}): Promise<SmbResponse> {
    if (this.failure) throw this.failure;
    opts.signal?.throwIfAborted();
    const charge = this.largeMtu ? Math.max(1, opts.charge ?? 1) : 1;
    await this.takeCredits(charge, opts.signal);
    const messageId = this.nextMessageId;
    this.nextMessageId += charge;
    const sign = (this.signAll || opts.sign === true) && this.signingKey !== null;
    const header = Buffer.alloc(HEADER_BYTES);
    PROTOCOL_ID.copy(header, 0);
    header.writeUInt16LE(64, 4);
    // SMB 2.0.2 has no multi-credit requests: CreditCharge must be 0 there.
    header.writeUInt16LE(this.dialect === Dialect.SMB202 || this.dialect === 0 ? 0 : charge, 6);
    header.writeUInt16LE(command, 12);
    header.writeUInt16LE(this.credits + charge < CREDIT_TARGET ? charge + 64 : charge, 14);
    header.writeUInt32LE(sign ? Flags.SIGNED : 0, 16);
    header.writeBigUInt64LE(BigInt(messageId), 24);
    header.writeUInt32LE(opts.treeId ?? 0, 36);
    header.writeBigUInt64LE(command === Command.NEGOTIATE ? 0n : this.sessionId, 40);
    const msg = Buffer.concat([Buffer.alloc(4), header, body]);
    msg.writeUInt32BE(msg.length - 4, 0);
    if (sign) this.signature(msg.subarray(4)).copy(msg, 4 + 48);
    opts.sent?.(msg.subarray(4));
    return new Promise<SmbResponse>((resolve, reject) => {
      const entry: Pending = {
        command,
        ok: opts.ok ?? [],
        resolve,
        reject,
        abandoned: false,
        expectSigned: sign,
        timer: setTimeout(() => this.fail(new SmbConnectionError(`no answer to ${COMMAND_NAMES[command]} within ${this.timeoutMs / 1000} s`, 'ETIMEDOUT')), this.timeoutMs),
      };
      this.pending.set(messageId, entry);
      if (opts.signal) {
        const signal = opts.signal;
        const onAbort = () => {
          entry.abandoned = true;
          reject(signal.reason instanceof Error ? signal.reason : new Error('aborted'));
        };
        signal.addEventListener('abort', onAbort, { once: true });
        const settle = <T>(f: (v: T) => void) => (v: T) => {
          signal.removeEventListener('abort', onAbort);
          f(v);
        };
        entry.resolve = settle(resolve);
        entry.reject = settle(reject);
      }
      this.socket.write(msg);
    });
  }

  /** Closes the socket; requests in flight fail. */
  destroy(): void {
    this.fail(new SmbConnectionError('connection closed', 'ECONNABORTED'));
  }

  private async takeCredits(charge: number, signal?: AbortSignal): Promise<void> {
    if (this.creditWaiters.length === 0 && this.credits >= charge) {
      this.credits -= charge;
      return;
    }
    await new Promise<void>((go, fail) => {
      const waiter = { charge, go, fail };
      this.creditWaiters.push(waiter);
      signal?.addEventListener('abort', () => {
        const i = this.creditWaiters.indexOf(waiter);
        if (i >= 0) this.creditWaiters.splice(i, 1);
        fail(signal.reason instanceof Error ? signal.reason : new Error('aborted'));
      }, { once: true });
    });
  }

  private grant(credits: number): void {
    this.credits += credits;
    while (this.creditWaiters.length > 0 && this.credits >= this.creditWaiters[0]!.charge) {
      const waiter = this.creditWaiters.shift()!;
      this.credits -= waiter.charge;
      waiter.go();
    }
  }

  private signature(message: Buffer): Buffer {
    const key = this.signingKey!;
    const saved = Buffer.from(message.subarray(48, 64));
    message.fill(0, 48, 64);
    let sig: Buffer;
    if (this.signingAlgorithm === 'aes-gmac') {
      // Nonce: the MessageId, then 1 for a server's message (MS-SMB2 3.1.4.1); the client sends no CANCEL.
      const nonce = Buffer.alloc(12);
      message.copy(nonce, 0, 24, 32);
      nonce.writeUInt32LE(message.readUInt32LE(16) & Flags.SERVER_TO_REDIR ? 1 : 0, 8);
      sig = aesGmac(key, nonce, message);
    } else if (this.signingAlgorithm === 'aes-cmac') sig = aesCmac(key, message);
    else sig = createHmac('sha256', key).update(message).digest().subarray(0, 16);
    saved.copy(message, 48);
    return sig;
  }

  private onData(data: Buffer): void {
    this.chunks.push(data);
    this.buffered += data.length;
    while (this.buffered >= 4) {
      const head = this.peek(4);
      const length = head.readUInt32BE(0) & 0xffffff;
      if (head[0] !== 0) return this.fail(new SmbConnectionError('the server sent a message that is not SMB2 over Direct TCP'));
      if (this.buffered < 4 + length) return;
      const frame = this.take(4 + length).subarray(4);
      try {
        this.onMessage(frame);
      } catch (err) {
        return this.fail(err instanceof SmbConnectionError ? err : new SmbConnectionError((err as Error).message, undefined, { cause: err }));
      }
    }
  }

  private onMessage(msg: Buffer): void {
    if (msg.length >= 4 && msg.subarray(0, 4).equals(TRANSFORM_ID)) throw new SmbConnectionError('the server sent an encrypted message', 'ENCRYPTED');
    if (msg.length < HEADER_BYTES || !msg.subarray(0, 4).equals(PROTOCOL_ID)) throw new SmbConnectionError('the server does not speak SMB2 (is it an SMB server, with SMB2 enabled?)', 'EPROTO');
    const status = msg.readUInt32LE(8);
    const flags = msg.readUInt32LE(16);
    this.grant(msg.readUInt16LE(14));
    const messageId = Number(msg.readBigUInt64LE(24));
    const entry = this.pending.get(messageId);
    // Unsolicited (oplock breaks have message id 0xFFFF...; the client takes no oplocks) or unknown.
    if (!entry) return;
    if (status === Status.PENDING && flags & Flags.ASYNC) {
      // Interim answer: the final one follows with the same MessageId; the server is working on it.
      this.interimResponses++;
      entry.timer.refresh();
      return;
    }
    this.pending.delete(messageId);
    clearTimeout(entry.timer);
    if (entry.abandoned) return;
    if (flags & Flags.SIGNED) {
      if (this.signingKey && !timingSafeEqual(this.signature(msg), msg.subarray(48, 64))) {
        throw new SmbConnectionError('a response carried a wrong signature (tampered with, or a different session key)', 'EBADSIG');
      }
    } else if (entry.expectSigned && status !== Status.PENDING) {
      throw new SmbConnectionError('a response that must be signed was not', 'EBADSIG');
    }
    const response: SmbResponse = { status, msg, sessionId: msg.readBigUInt64LE(40) };
    if (status === Status.SUCCESS || entry.ok.includes(status)) entry.resolve(response);
    else entry.reject(new SmbStatusError(status, entry.command));
  }

  private peek(n: number): Buffer {
    if (this.chunks[0]!.length >= n) return this.chunks[0]!;
    const joined = Buffer.concat(this.chunks);
    this.chunks.length = 0;
    this.chunks.push(joined);
    return joined;
  }

  private take(n: number): Buffer {
    const first = this.chunks[0]!;
    let out: Buffer;
    if (first.length >= n) {
      out = first.subarray(0, n);
      if (first.length === n) this.chunks.shift();
      else this.chunks[0] = first.subarray(n);
    } else {
      const joined = Buffer.concat(this.chunks);
      out = joined.subarray(0, n);
      this.chunks.length = 0;
      if (joined.length > n) this.chunks.push(joined.subarray(n));
    }
    this.buffered -= n;
    return out;
  }

  private fail(err: Error): void {
    if (this.failure) return;
    this.failure = err;
    this.closed = true;
    this.socket.destroy();
    for (const entry of this.pending.values()) {
      clearTimeout(entry.timer);
      if (!entry.abandoned) entry.reject(err);
    }
    this.pending.clear();
    for (const waiter of this.creditWaiters.splice(0)) waiter.fail(err);
    for (const listener of this.closeListeners) listener();
  }
}
