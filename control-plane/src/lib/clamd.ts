import { connect, type Socket } from 'node:net';
import type { Readable } from 'node:stream';

/**
 * A small clamd client (INSTREAM, PING, VERSION) over node:net, written here because the npm
 * clamd clients buffer whole files or are unmaintained. Protocol (clamd(8)): `z`-prefixed commands
 * end with NUL and so do their replies; INSTREAM data goes as chunks, each prefixed by its length
 * as a 4-byte big-endian integer, and a zero-length chunk ends the stream. clamd then answers
 * `stream: OK`, `stream: <signature> FOUND` or `<message> ERROR`, and closes the connection.
 */

/** clamd reached over TCP, or over a unix socket (an absolute path). */
export type ClamdAddress = { host: string; port: number } | { path: string };

/** What clamd said about a stream. */
export type ScanVerdict = { clean: true } | { clean: false; signature: string };

/**
 * Why a scan gave no verdict. `size-limit`: clamd refused the size (its StreamMaxLength, or its
 * MaxFileSize/MaxScanSize reported through AlertExceedsMax); every other reason means the scanner
 * is unusable right now.
 */
export type ClamdFailure = 'unreachable' | 'timeout' | 'closed' | 'error' | 'size-limit' | 'protocol';

export class ClamdError extends Error {
  constructor(
    readonly reason: ClamdFailure,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'ClamdError';
  }
}

/**
 * The largest stream clamd 1.x scans whole: its MaxFileSize is capped internally at INT_MAX - 2
 * bytes (2 GiB - 3 B, whatever clamd.conf says). A larger stream is skipped unscanned, or with
 * `AlertExceedsMax yes` reported as `Heuristics.Limits.Exceeded.MaxFileSize`.
 */
export const CLAMD_MAX_SCAN_BYTES = 2_147_483_645;

/** Largest INSTREAM chunk sent; bigger source chunks are cut (clamd reads any size, this bounds each write). */
const FRAME_BYTES = 256 * 1024;

/** `host:port`, `[v6]:port` or the socket path, for messages and logs. */
export function describeAddress(address: ClamdAddress): string {
  if ('path' in address) return address.path;
  return address.host.includes(':') ? `[${address.host}]:${address.port}` : `${address.host}:${address.port}`;
}

function open(address: ClamdAddress): Socket {
  return 'path' in address ? connect({ path: address.path }) : connect({ host: address.host, port: address.port });
}

/**
 * Reads clamd's reply to INSTREAM. Fails closed: anything but `stream: OK` or `… FOUND` throws.
 * Size refusals (`INSTREAM size limit exceeded. ERROR`, and the AlertExceedsMax alerts for
 * MaxFileSize/MaxScanSize) are `size-limit` errors rather than verdicts: the file was not scanned.
 */
export function parseInstreamReply(raw: string): ScanVerdict {
  const line = raw.replace(/\0+$/, '').trim();
  if (line === '') throw new ClamdError('closed', 'clamd closed the connection without a verdict');
  if (/^stream: OK$/.test(line)) return { clean: true };
  const found = /^stream: (.+) FOUND$/.exec(line);
  if (found) {
    const signature = found[1]!.trim();
    if (/^Heuristics\.Limits\.Exceeded\.(MaxFileSize|MaxScanSize)\b/.test(signature)) {
      throw new ClamdError('size-limit', `clamd did not scan the whole file (${signature})`);
    }
    return { clean: false, signature };
  }
  if (/INSTREAM size limit exceeded/i.test(line)) throw new ClamdError('size-limit', 'clamd refused the size (INSTREAM size limit exceeded)');
  if (/ ERROR$/.test(line)) throw new ClamdError('error', `clamd reported an error (${line.slice(0, 200)})`);
  throw new ClamdError('protocol', `clamd answered something unexpected (${JSON.stringify(line.slice(0, 200))})`);
}

export interface InstreamOptions {
  /**
   * How long clamd may keep us waiting: to accept the connection, to take more data while the
   * socket is full, and to give its verdict after the end of the stream. Time spent waiting for
   * `source` itself is not counted (a slow upload is not a slow scanner).
   */
  timeoutMs: number;
  /** Aborting destroys the socket and rejects with the signal's reason; `source` is left as it is. */
  signal?: AbortSignal;
  /** Called once clamd has accepted the connection, before any byte of `source` is read. */
  onConnect?: () => void;
}

/** What a scan of a stream that was closed (destroyed without an error) before its end rejects with. */
export const prematureClose = (): Error =>
  Object.assign(new Error('The stream to scan was closed before its end'), { code: 'ERR_STREAM_PREMATURE_CLOSE' });

const abortReason = (signal: AbortSignal): unknown =>
  signal.reason ?? Object.assign(new Error('The scan was aborted'), { name: 'AbortError' });

/**
 * Streams `source` to clamd with INSTREAM while it is read, chunk by chunk: `source` is paused
 * whenever the socket is full, so memory stays bounded by one chunk whatever the size. Resolves
 * with the verdict once clamd has seen the end of the stream. Rejects with a {@link ClamdError}
 * when clamd cannot be reached, answers an error, closes early or keeps us waiting longer than
 * `timeoutMs`; with `source`'s own error when it fails; with the abort reason on abort. The
 * connection is made before `source` is read, so an unreachable clamd consumes nothing. On any
 * failure the socket is destroyed and `source` is paused and left to the caller; never a verdict.
 * `source` must not have been read from yet (that rejects), and is paused at once until clamd
 * answers the connection, so no byte flows past the scan.
 */
export function instream(address: ClamdAddress, source: Readable, opts: InstreamOptions): Promise<ScanVerdict> {
  return new Promise<ScanVerdict>((resolve, reject) => {
    const { signal, timeoutMs } = opts;
    if (signal?.aborted) return reject(abortReason(signal));
    // Bytes read before the scan began would go unscanned: a programming error, never a verdict.
    if (source.readableDidRead) return reject(new Error('The stream to scan was already read from: its first bytes would go unscanned'));
    // Nothing may flow (e.g. into a pipe set up just before) until our listener is attached.
    source.pause();
    const socket = open(address);
    const replyParts: Buffer[] = [];
    let connected = false;
    let ended = false;
    let settled = false;
    let waitingForDrain = false;
    let timer: NodeJS.Timeout | undefined;

    const arm = (waitingFor: string) => {
      clearTimeout(timer);
      timer = setTimeout(() => fail(new ClamdError('timeout', `clamd did not answer within ${timeoutMs} ms (${waitingFor})`)), timeoutMs);
    };
    const disarm = () => clearTimeout(timer);
    const cleanup = () => {
      disarm();
      socket.destroy();
      source.off('data', onData).off('end', onEnd).off('error', onSourceError).off('close', onSourceClose);
      socket.off('drain', onDrain);
      signal?.removeEventListener('abort', onAbort);
    };
    function fail(err: unknown) {
      if (settled) return;
      settled = true;
      cleanup();
      if (!source.readableEnded) source.pause();
      reject(err);
    }
    function settleWithReply(raw: string) {
      if (settled) return;
      try {
        const verdict = parseInstreamReply(raw);
        // clamd scans only what it received: an OK before our end of stream scanned part of the file.
        if (verdict.clean && !ended) throw new ClamdError('protocol', 'clamd answered OK before the end of the stream');
        settled = true;
        cleanup();
        resolve(verdict);
      } catch (err) {
        fail(err);
      }
    }

    function writeFrame(part: Buffer): boolean {
      const header = Buffer.allocUnsafe(4);
      header.writeUInt32BE(part.length, 0);
      socket.cork();
      socket.write(header);
      socket.write(part);
      socket.uncork();
      return !socket.writableNeedDrain;
    }
    function onData(chunk: Buffer | string) {
      if (settled) return;
      const data = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
      // A zero-length frame would end the stream early: empty chunks carry nothing anyway.
      let open = true;
      for (let offset = 0; offset < data.length; offset += FRAME_BYTES) {
        open = writeFrame(data.subarray(offset, offset + FRAME_BYTES));
      }
      if (!open && !waitingForDrain) {
        waitingForDrain = true;
        source.pause();
        arm('clamd stopped reading the stream');
        socket.once('drain', onDrain);
      }
    }
    function onDrain() {
      waitingForDrain = false;
      if (settled) return;
      // 'end' can come while the socket is full: then the verdict's timer runs, and stays.
      if (ended) return;
      disarm();
      source.resume();
    }
    function onEnd() {
      if (settled) return;
      ended = true;
      socket.write(Buffer.alloc(4));
      arm('waiting for the verdict');
    }
    function onSourceError(err: Error) {
      fail(err);
    }
    function onSourceClose() {
      if (!ended) fail(prematureClose());
    }
    function onAbort() {
      fail(abortReason(signal!));
    }

    signal?.addEventListener('abort', onAbort, { once: true });
    arm('connecting');
    socket.once('connect', () => {
      connected = true;
      disarm();
      opts.onConnect?.();
      socket.write('zINSTREAM\0');
      source.on('data', onData).once('end', onEnd).once('error', onSourceError).once('close', onSourceClose);
      if (source.readableEnded) onEnd();
      else source.resume();
    });
    socket.on('data', (data: Buffer) => {
      replyParts.push(data);
      const reply = Buffer.concat(replyParts);
      if (reply.includes(0)) settleWithReply(reply.subarray(0, reply.indexOf(0)).toString('utf8'));
      else if (reply.length > 4096) fail(new ClamdError('protocol', 'clamd answered more than 4 KiB without ending its reply'));
    });
    // A reply without its NUL is still a reply; none at all is `closed`.
    socket.once('end', () => settleWithReply(Buffer.concat(replyParts).toString('utf8')));
    socket.on('error', (err: NodeJS.ErrnoException) => {
      // clamd may answer early (a size refusal) and close while we still write: its reply wins.
      if (replyParts.length > 0) return settleWithReply(Buffer.concat(replyParts).toString('utf8'));
      // The address stays out of the message (it reaches API clients); the cause carries it to the log.
      if (!connected) fail(new ClamdError('unreachable', `cannot connect to clamd (${err.code ?? 'connection failed'})`, { cause: err }));
      else fail(new ClamdError('closed', `clamd closed the connection without a verdict (${err.code ?? 'connection failed'})`, { cause: err }));
    });
    socket.once('close', () => {
      if (replyParts.length > 0) settleWithReply(Buffer.concat(replyParts).toString('utf8'));
      else fail(new ClamdError('closed', 'clamd closed the connection without a verdict'));
    });
  });
}

/** Sends one NUL-terminated command and resolves with the NUL-terminated reply (without the NUL). */
function command(address: ClamdAddress, cmd: string, timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = open(address);
    const parts: Buffer[] = [];
    const timer = setTimeout(() => done(new ClamdError('timeout', `clamd did not answer ${cmd} within ${timeoutMs} ms`)), timeoutMs);
    let settled = false;
    function done(err: Error | null, reply?: string) {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      if (err) reject(err);
      else resolve(reply!);
    }
    socket.once('connect', () => socket.write(`z${cmd}\0`));
    socket.on('data', (data: Buffer) => {
      parts.push(data);
      const reply = Buffer.concat(parts);
      if (reply.includes(0)) done(null, reply.subarray(0, reply.indexOf(0)).toString('utf8'));
    });
    socket.once('end', () => done(null, Buffer.concat(parts).toString('utf8')));
    socket.on('error', (err) => done(new ClamdError('unreachable', `clamd at ${describeAddress(address)}: ${err.message}`, { cause: err })));
    socket.once('close', () => done(new ClamdError('closed', `clamd closed the connection without answering ${cmd}`)));
  });
}

/** True when clamd answers PING with PONG within `timeoutMs`; false for anything else. */
export async function clamdPing(address: ClamdAddress, timeoutMs: number): Promise<boolean> {
  try {
    return (await command(address, 'PING', timeoutMs)).trim() === 'PONG';
  } catch {
    return false;
  }
}

/** clamd's VERSION reply (`ClamAV 1.4.6/27000/…`: engine/signature version/date), or null when it does not answer. */
export async function clamdVersion(address: ClamdAddress, timeoutMs: number): Promise<string | null> {
  try {
    const reply = (await command(address, 'VERSION', timeoutMs)).trim();
    return reply.startsWith('ClamAV') ? reply : null;
  } catch {
    return null;
  }
}

export interface ClamdConfOptions {
  /** Signature databases: `/var/lib/clamav` where freshclam puts them, or a test database. */
  databaseDir: string;
  /** Unix socket clamd listens on. */
  localSocket: string;
  /** Also listen on TCP (always 127.0.0.1 here). */
  tcpPort?: number;
  /** clamd writes every INSTREAM to a temporary file here before scanning it: needs room for the largest upload times the concurrent uploads. */
  temporaryDir: string;
  logFile: string;
  /** Bytecode signatures come only with the official databases; off for a test database. */
  bytecode: boolean;
}

/**
 * The clamd.conf xfer runs clamd with (the test service and `npm start`), one place for both.
 * Sizes are raised to what clamd can scan at all (CLAMD_MAX_SCAN_BYTES; its defaults of 100 MB
 * would refuse larger uploads), and `AlertExceedsMax yes` turns any file clamd does not scan
 * whole into an alert, where clamd would otherwise answer OK for what it skipped (fail open).
 */
export function clamdConf(o: ClamdConfOptions): string {
  return [
    '# Written by xfer (control-plane/src/lib/clamd.ts); rewritten at every start.',
    'Foreground yes',
    `LocalSocket ${o.localSocket}`,
    'LocalSocketMode 600',
    'FixStaleSocket yes',
    ...(o.tcpPort === undefined ? [] : [`TCPSocket ${o.tcpPort}`, 'TCPAddr 127.0.0.1']),
    `DatabaseDirectory ${o.databaseDir}`,
    `TemporaryDirectory ${o.temporaryDir}`,
    `LogFile ${o.logFile}`,
    'LogTime yes',
    `Bytecode ${o.bytecode ? 'yes' : 'no'}`,
    // StreamMaxLength past this only spools data clamd then refuses to scan; at it, clamd answers
    // "INSTREAM size limit exceeded" as soon as a stream grows larger (413, nothing kept).
    `StreamMaxLength ${CLAMD_MAX_SCAN_BYTES}`,
    `MaxFileSize ${CLAMD_MAX_SCAN_BYTES}`,
    // Counts a file plus everything unpacked from it: room for an archive of the largest size.
    'MaxScanSize 4G',
    'AlertExceedsMax yes',
    // clamd's default; XFER_CLAMD_TIMEOUT_MS (120 s by default) should not be shorter.
    'MaxScanTime 120000',
    // An upload may pause between chunks (a slow client) longer than clamd's default of 120 s.
    'ReadTimeout 300',
    '',
  ].join('\n');
}
