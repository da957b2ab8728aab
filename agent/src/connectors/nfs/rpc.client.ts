import { randomInt } from 'node:crypto';
import type { Socket } from 'node:net';
import { hostname } from 'node:os';
import { closedAccess } from '../access.js';
import type { NetworkGuard } from '../network-guard.js';
import { ConnectorError } from '../types.js';
import { networkMessages } from '../network-errors.js';
import { XdrError, XdrReader, XdrWriter } from './xdr.js';

/** RFC 5531: message types, reply and accept states, auth flavors. */
const CALL = 0;
const REPLY = 1;
const MSG_ACCEPTED = 0;
const AUTH_NONE = 0;
const AUTH_SYS = 1;
const LAST_FRAGMENT = 0x8000_0000;
/** No reply is this large (a READ reply is rtmax plus a few hundred bytes): a larger mark is garbage. */
const MAX_RECORD_BYTES = 64 * 1024 * 1024;

const PROGRAMS: Record<number, string> = { 100000: 'portmap', 100003: 'NFS', 100005: 'MOUNT' };
const ACCEPT_STATES = ['SUCCESS', 'PROG_UNAVAIL', 'PROG_MISMATCH', 'PROC_UNAVAIL', 'GARBAGE_ARGS', 'SYSTEM_ERR'];
const AUTH_STATES = ['AUTH_OK', 'AUTH_BADCRED', 'AUTH_REJECTEDCRED', 'AUTH_BADVERF', 'AUTH_REJECTEDVERF', 'AUTH_TOOWEAK', 'AUTH_INVALIDRESP', 'AUTH_FAILED'];

/** The AUTH_SYS identity every call presents (RFC 5531 appendix A). */
export interface AuthSys {
  uid: number;
  gid: number;
}

export interface RpcClientOptions {
  host: string;
  port: number;
  /** What should listen there, for messages: `an NFS server`, `a MOUNT server`, `rpcbind`. */
  listener: string;
  auth: AuthSys;
  /** A call without a reply this long fails TRANSIENT and the connection is dropped. */
  timeoutMs: number;
  /**
   * Bind a source port below 1024 when the process may (root): Linux knfsd's default `secure`
   * export option refuses clients on other ports. Falls back to any port when refused.
   */
  reservedPort: boolean;
  /** Checks the host and every address it resolves to (the agent's allow/deny lists); default: the default rules. */
  guard?: NetworkGuard;
}

interface Pending {
  parts: Buffer[];
  /** Sent again once, on a new connection, when the connection drops first (idempotent calls). */
  retry: boolean;
  resolve(reply: XdrReader): void;
  reject(err: unknown): void;
  timer?: NodeJS.Timeout;
}

/**
 * ONC-RPC over one TCP connection (RFC 5531, record marking of section 11): calls are
 * multiplexed by xid, so any number may be outstanding; replies come back in any order. The
 * connection is opened on the first call and again after it drops; calls marked `retry`
 * (idempotent ones) that were in flight are sent again once on the new connection.
 */
export class RpcClient {
  readonly where: string;
  private readonly credential: Buffer;
  private readonly network: Record<string, string>;
  private socket: Socket | null = null;
  private connecting: Promise<Socket> | null = null;
  private readonly pending = new Map<number, Pending>();
  private xid = randomInt(0x7fff_ffff);
  private closed = false;
  // Receive side: unparsed bytes, and the fragments of the record being assembled.
  private inbox: Buffer[] = [];
  private inboxBytes = 0;
  private fragments: Buffer[] = [];

  constructor(private readonly options: RpcClientOptions) {
    this.where = `${options.host}:${options.port}`;
    this.network = networkMessages(options.listener);
    this.credential = authSys(options.auth);
  }

  /**
   * Calls `proc` of `prog` version `vers` with XDR-encoded `args` (buffers sent as they are: a
   * WRITE's data is not copied) and resolves with a reader at the start of the results.
   */
  call(prog: number, vers: number, proc: number, args: Buffer[], options: { signal?: AbortSignal; retry?: boolean } = {}): Promise<XdrReader> {
    if (this.closed) return Promise.reject(new ConnectorError('TRANSIENT', `${this.where}: the connector is closed`));
    const signal = options.signal;
    if (signal?.aborted) return Promise.reject(aborted(signal));
    const xid = this.nextXid();
    const header = new XdrWriter(128)
      .u32(xid).u32(CALL).u32(2).u32(prog).u32(vers).u32(proc)
      .fixed(this.credential)
      .u32(AUTH_NONE).u32(0)
      .finish();
    return new Promise<XdrReader>((resolve, reject) => {
      const onAbort = () => {
        this.forget(xid);
        reject(aborted(signal!));
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      const done = () => signal?.removeEventListener('abort', onAbort);
      this.pending.set(xid, {
        parts: [header, ...args],
        retry: options.retry ?? true,
        resolve: (reply) => { done(); resolve(reply); },
        reject: (err) => { done(); reject(rpcError(err, prog, vers, this.where)); },
      });
      this.send(xid);
    });
  }

  /** Drops the connection (the next call opens a new one), failing or re-sending what is in flight. */
  drop(): void {
    this.socket?.destroy();
  }

  async close(): Promise<void> {
    this.closed = true;
    const socket = this.socket ?? (await this.connecting?.catch(() => null));
    socket?.destroy();
    for (const [xid, call] of this.pending) {
      this.forget(xid);
      call.reject(new ConnectorError('TRANSIENT', `${this.where}: the connector is closed`));
    }
  }

  private nextXid(): number {
    this.xid = (this.xid + 1) >>> 0;
    return this.xid;
  }

  private forget(xid: number): void {
    const call = this.pending.get(xid);
    if (call?.timer) clearTimeout(call.timer);
    this.pending.delete(xid);
  }

  private send(xid: number): void {
    this.open().then(
      (socket) => {
        const call = this.pending.get(xid);
        if (!call) return; // aborted while connecting
        const length = call.parts.reduce((n, part) => n + part.length, 0);
        const mark = Buffer.allocUnsafe(4);
        mark.writeUInt32BE((LAST_FRAGMENT | length) >>> 0);
        socket.cork();
        socket.write(mark);
        for (const part of call.parts) socket.write(part);
        process.nextTick(() => socket.uncork());
        call.timer ??= setTimeout(() => {
          this.forget(xid);
          call.reject(new ConnectorError('TRANSIENT', `${this.where}: no reply within ${this.options.timeoutMs / 1000} s`));
          // A server that dropped one call may hold the others: start over on a new connection.
          this.drop();
        }, this.options.timeoutMs);
      },
      (err: unknown) => {
        const call = this.pending.get(xid);
        if (!call) return;
        this.forget(xid);
        call.reject(err);
      },
    );
  }

  private open(): Promise<Socket> {
    if (this.socket) return Promise.resolve(this.socket);
    this.connecting ??= this.dial().then(
      (socket) => {
        this.connecting = null;
        if (this.closed) {
          socket.destroy();
          throw new ConnectorError('TRANSIENT', `${this.where}: the connector is closed`);
        }
        this.attach(socket);
        return socket;
      },
      (err: unknown) => {
        this.connecting = null;
        throw err;
      },
    );
    return this.connecting;
  }

  private async dial(): Promise<Socket> {
    const reserved = this.options.reservedPort && process.getuid?.() === 0;
    for (let attempt = 0; ; attempt++) {
      const localPort = reserved && attempt < 8 ? randomInt(600, 1024) : undefined;
      try {
        return await this.dialOnce(localPort);
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (localPort !== undefined && (code === 'EADDRINUSE' || code === 'EACCES' || code === 'EADDRNOTAVAIL')) continue;
        throw this.networkError(err, 'connecting to');
      }
    }
  }

  private dialOnce(localPort: number | undefined): Promise<Socket> {
    return new Promise((resolve, reject) => {
      const socket = (this.options.guard ?? closedAccess().network).connect({ host: this.options.host, port: this.options.port, localPort, noDelay: true });
      const timer = setTimeout(() => socket.destroy(Object.assign(new Error('timed out'), { code: 'ETIMEDOUT' })), this.options.timeoutMs);
      socket.once('connect', () => {
        clearTimeout(timer);
        socket.removeListener('error', reject);
        resolve(socket);
      });
      socket.once('error', (err) => {
        clearTimeout(timer);
        reject(err);
      });
    });
  }

  private attach(socket: Socket): void {
    this.socket = socket;
    this.inbox = [];
    this.inboxBytes = 0;
    this.fragments = [];
    let failure: unknown = null;
    socket.on('data', (data: Buffer) => {
      try {
        this.receive(data);
      } catch (err) {
        failure = err;
        socket.destroy();
      }
    });
    socket.on('error', (err) => { failure ??= err; });
    socket.on('close', () => {
      if (this.socket === socket) this.socket = null;
      const lost = failure instanceof ConnectorError ? failure : this.networkError(failure ?? Object.assign(new Error('closed'), { code: 'EPIPE' }), 'connection to');
      for (const [xid, call] of [...this.pending]) {
        if (call.timer) clearTimeout(call.timer);
        call.timer = undefined;
        if (call.retry && !this.closed) {
          call.retry = false;
          this.send(xid);
        } else {
          this.pending.delete(xid);
          call.reject(lost);
        }
      }
    });
  }

  /** Record marking: 4-byte marks (last-fragment bit, 31-bit length), fragments joined into records. */
  private receive(data: Buffer): void {
    this.inbox.push(data);
    this.inboxBytes += data.length;
    for (;;) {
      if (this.inboxBytes < 4) return;
      const mark = this.peek(4).readUInt32BE(0);
      const length = mark & 0x7fff_ffff;
      if (length > MAX_RECORD_BYTES) throw new ConnectorError('TRANSIENT', `${this.where}: the server sent a record of ${length} bytes (not an RPC server?)`);
      if (this.inboxBytes < 4 + length) return;
      this.take(4);
      this.fragments.push(this.take(length));
      if (mark & LAST_FRAGMENT) {
        const record = this.fragments.length === 1 ? this.fragments[0]! : Buffer.concat(this.fragments);
        this.fragments = [];
        this.dispatch(record);
      }
    }
  }

  private peek(bytes: number): Buffer {
    const first = this.inbox[0]!;
    return first.length >= bytes ? first : Buffer.concat(this.inbox).subarray(0, bytes);
  }

  private take(bytes: number): Buffer {
    this.inboxBytes -= bytes;
    const first = this.inbox[0]!;
    if (first.length > bytes) {
      this.inbox[0] = first.subarray(bytes);
      return first.subarray(0, bytes);
    }
    if (first.length === bytes) {
      this.inbox.shift();
      return first;
    }
    const out = Buffer.allocUnsafe(bytes);
    let filled = 0;
    while (filled < bytes) {
      const head = this.inbox[0]!;
      const n = Math.min(head.length, bytes - filled);
      head.copy(out, filled, 0, n);
      filled += n;
      if (n === head.length) this.inbox.shift();
      else this.inbox[0] = head.subarray(n);
    }
    return out;
  }

  private dispatch(record: Buffer): void {
    const reader = new XdrReader(record);
    const xid = reader.u32();
    const call = this.pending.get(xid);
    // A reply to a call given up on (aborted, timed out): nothing waits for it.
    if (!call) return;
    this.forget(xid);
    try {
      if (reader.u32() !== REPLY) throw new ConnectorError('TRANSIENT', `${this.where}: the server sent a call instead of a reply`);
      if (reader.u32() !== MSG_ACCEPTED) {
        call.reject(denied(reader));
        return;
      }
      reader.u32(); // verifier flavor
      reader.opaque(400);
      const state = reader.u32();
      if (state === 0) call.resolve(reader);
      else call.reject(new RpcRejected(ACCEPT_STATES[state] ?? `accept_stat ${state}`, state === 2 ? [reader.u32(), reader.u32()] : undefined));
    } catch (err) {
      call.reject(err);
    }
  }

  private networkError(err: unknown, doing: string): ConnectorError {
    if (err instanceof ConnectorError) return err;
    const code = (err as NodeJS.ErrnoException | null)?.code;
    const words = (code && this.network[code]) ?? (err as Error | null)?.message ?? String(err);
    return new ConnectorError('TRANSIENT', `${doing} ${this.where}: ${words}`, { cause: err });
  }
}

/** The server refused the call at the RPC level: no such program, version or procedure; credentials refused. */
export class RpcRejected extends Error {
  override name = 'RpcRejected';
  constructor(
    readonly state: string,
    readonly versions?: [number, number],
  ) {
    super(state);
  }
}

function denied(reader: XdrReader): RpcRejected {
  const reject = reader.u32();
  if (reject === 0) return new RpcRejected('RPC_MISMATCH', [reader.u32(), reader.u32()]);
  const stat = reader.u32();
  return new RpcRejected(AUTH_STATES[stat] ?? `auth_stat ${stat}`);
}

/** An RPC-level refusal as a ConnectorError naming the server and what it refused. */
function rpcError(err: unknown, prog: number, vers: number, where: string): unknown {
  const program = PROGRAMS[prog] ?? `program ${prog}`;
  if (err instanceof XdrError) return new ConnectorError('TRANSIENT', `${where}: malformed ${program} reply (${err.message})`, { cause: err });
  if (!(err instanceof RpcRejected)) return err;
  switch (err.state) {
    case 'PROG_UNAVAIL':
      return new ConnectorError('UNSUPPORTED', `${where} does not serve ${program} (is this the right port?)`, { cause: err });
    case 'PROG_MISMATCH':
      return new ConnectorError('UNSUPPORTED', `${where} serves ${program} versions ${err.versions![0]} to ${err.versions![1]}, not version ${vers}`, { cause: err });
    case 'AUTH_TOOWEAK':
    case 'AUTH_BADCRED':
    case 'AUTH_REJECTEDCRED':
      return new ConnectorError('AUTH', `${where} refused the AUTH_SYS credentials (${err.state}): the export may require Kerberos, or a privileged source port (run the agent as root or export with "insecure")`, { cause: err });
    case 'SYSTEM_ERR':
      return new ConnectorError('TRANSIENT', `${where}: ${program} failed on the server (SYSTEM_ERR)`, { cause: err });
    default:
      return new ConnectorError('UNSUPPORTED', `${where} refused a ${program} call (${err.state})`, { cause: err });
  }
}

function aborted(signal: AbortSignal): ConnectorError {
  return new ConnectorError('TRANSIENT', 'aborted', { cause: signal.reason });
}

/** opaque_auth of flavor AUTH_SYS: stamp, machine name, uid, gid, no supplementary groups. */
function authSys(auth: AuthSys): Buffer {
  const body = new XdrWriter(64)
    .u32(Math.floor(Date.now() / 1000))
    .string(hostname().slice(0, 255))
    .u32(auth.uid)
    .u32(auth.gid)
    .u32(0)
    .finish();
  return new XdrWriter(96).u32(AUTH_SYS).opaque(body).finish();
}
