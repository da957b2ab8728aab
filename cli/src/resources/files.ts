import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { rename, rm, stat } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { Args, Errors, Flags } from '@oclif/core';
import { ApiError, ExitCode, type ByteRange, type Download, type FileRecord } from '@xfer/shared';
import { usageError } from '../base-command.js';
import { Messages } from '../messages.js';
import type { Column } from '../output.js';
import { createProgress, formatBytes, progressFlags, progressMode, type ProgressInput, type ProgressMode } from '../progress/index.js';

export const fileColumns: Column<FileRecord>[] = [
  { header: 'id', get: (f) => f.id },
  { header: 'path', get: (f) => f.path },
  { header: 'name', get: (f) => f.name },
  { header: 'size', get: (f) => formatBytes(f.size) },
  { header: 'type', get: (f) => f.mime_type },
  { header: 'created', get: (f) => f.created_at },
];

export const fileIdArg = { id: Args.string({ description: 'File id', required: true }) };

const SIZE_UNITS: Readonly<Record<string, number>> = {
  '': 1, b: 1, kb: 1e3, mb: 1e6, gb: 1e9, tb: 1e12, kib: 2 ** 10, mib: 2 ** 20, gib: 2 ** 30, tib: 2 ** 40,
};

/** `1500`, `1.5MB` (decimal, like the sizes shown) or `2MiB` (binary) as a byte count; undefined when malformed. */
export function parseSize(text: string): number | undefined {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$/i.exec(text);
  const unit = m && SIZE_UNITS[m[2]!.toLowerCase()];
  return unit === undefined || unit === null ? undefined : Math.round(Number(m![1]) * unit);
}

export const sizeFlag = Flags.custom<number>({
  parse: async (text) => {
    const bytes = parseSize(text);
    if (bytes === undefined) throw usageError(Messages.badSize(text));
    return bytes;
  },
});

/** Flags of both downloads (a stored file by id, a share link). */
export const downloadFlags = {
  output: Flags.string({ char: 'o', description: 'File to write, or a directory to write the stored name into; - for stdout. Default: the stored name in the current directory' }),
  force: Flags.boolean({ char: 'f', description: 'Overwrite the output file when it exists' }),
  continue: Flags.boolean({ char: 'c', description: 'Resume an interrupted download from its partial file (<output>.xfer-part); keep the partial file on failure' }),
  ...progressFlags,
};

/** Where an unfinished download lives, so that the output path only ever holds a complete, verified file. */
export const PART_SUFFIX = '.xfer-part';

/** What a download to a file prints with --json (a download has no API `data`: this describes what was written). */
export interface SavedFile {
  /** The file written, as an absolute path; null for stdout. */
  file: string | null;
  name: string;
  size: number;
  sha256: string;
  /** Bytes taken from the partial file (0: a whole download). */
  resumed_from: number;
}

/** The flags of a download as a request, less how to open it. */
export function downloadRequest(
  flags: { output?: string; force: boolean; continue: boolean; quiet: boolean },
  json: boolean,
  open: DownloadRequest['open'],
  storedName?: () => Promise<string>,
): DownloadRequest {
  // stdout carries the content: there is no room for the JSON summary too.
  if (flags.output === '-' && json) throw usageError(Messages.jsonToStdout);
  return { open, output: flags.output, storedName, force: flags.force, resume: flags.continue, progress: progressMode({ json, quiet: flags.quiet }) };
}

export interface DownloadRequest {
  /** Starts the download, from `range` on when given, aborting when `signal` fires. */
  open(range: ByteRange | undefined, signal: AbortSignal): Promise<Download>;
  /** The --output flag. */
  output: string | undefined;
  /** Asks for the stored name before the download when it names the output (so that --continue finds the partial file). */
  storedName?: () => Promise<string>;
  force: boolean;
  resume: boolean;
  progress: ProgressMode;
}

/** A progress display fed by byte counts, redrawn at most every 100 ms (it is fed per chunk). */
export async function byteProgress(mode: ProgressMode, start: ProgressInput) {
  const display = await createProgress(mode);
  const state = { ...start };
  let drawn = 0;
  const draw = (always: boolean) => {
    const now = Date.now();
    if (!always && now - drawn < 100) return;
    drawn = now;
    display.update({ ...state });
  };
  return {
    add(bytes: number) { state.bytes += bytes; draw(false); },
    set(changes: Partial<ProgressInput>) { Object.assign(state, changes); draw(true); },
    stop() { display.update({ ...state }); display.stop(); },
  };
}

/** The chunks of `source` as they are read, each reported to `onChunk` first (an upload's body, or a pipeline stage that keeps backpressure). */
export async function* tapped(source: AsyncIterable<Uint8Array | string>, onChunk: (chunk: Buffer) => void): AsyncGenerator<Buffer> {
  for await (const raw of source) {
    const chunk = typeof raw === 'string' ? Buffer.from(raw) : Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength);
    onChunk(chunk);
    yield chunk;
  }
}

/** The SHA-256 of an ETag `"<sha256>"` (docs/api.md "Download"); undefined for any other ETag. */
export function etagSha256(etag: string | undefined): string | undefined {
  return /^(?:W\/)?"([0-9a-f]{64})"$/i.exec(etag ?? '')?.[1]?.toLowerCase();
}

/**
 * The stored name as a file name here: a server names a file as it likes (an absolute share URL
 * may be anyone's), so only its last segment, without control characters, is used.
 */
export function localName(stored: string | undefined): string {
  // eslint-disable-next-line no-control-regex
  const name = basename((stored ?? '').replace(/\\/g, '/')).replace(/[\u0000-\u001f\u007f]/g, '');
  return name === '' || name === '.' || name === '..' ? 'download' : name;
}

const isDirectory = (path: string) => stat(path).then((s) => s.isDirectory(), () => false);
const sizeOf = (path: string) => stat(path).then((s) => s.size, () => 0);
const exists = (path: string) => stat(path).then(() => true, () => false);

/** Checked before the request whenever the output path is known then: every request to a share link spends one of its downloads. */
async function refuseOverwrite(target: string, force: boolean): Promise<void> {
  if (!force && await exists(target)) throw usageError(Messages.outputExists(target));
  if (!await isDirectory(dirname(target))) throw usageError(Messages.noOutputDir(dirname(target)));
}

/** The partial file's bytes through the hash, so that a resumed download is verified whole. */
async function hashFile(path: string, hash: ReturnType<typeof createHash>): Promise<void> {
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
}

/**
 * Runs `work` with Ctrl-C and SIGTERM aborting it: the command then cleans up and exits 130 or
 * 143 rather than dying with a partial file behind.
 */
async function abortable<T>(work: (signal: AbortSignal, interrupted: () => NodeJS.Signals | undefined) => Promise<T>): Promise<T> {
  const controller = new AbortController();
  let caught: NodeJS.Signals | undefined;
  const onSignal = (signal: NodeJS.Signals) => { caught = signal; controller.abort(); };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    return await work(controller.signal, () => caught);
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}

const interruptedError = (signal: NodeJS.Signals, kept: string | null) =>
  new Errors.CLIError(Messages.downloadInterrupted(kept), { exit: signal === 'SIGINT' ? 130 : 143 });

/** Opens from `start`; a partial file already as long as the content (416) is downloaded again whole. */
async function openFrom(req: DownloadRequest, start: number, signal: AbortSignal): Promise<{ download: Download; from: number }> {
  if (start === 0) return { download: await req.open(undefined, signal), from: 0 };
  try {
    const download = await req.open({ start }, signal);
    if (download.status !== 206) return { download, from: 0 };
    if (!download.contentRange?.startsWith(`bytes ${start}-`)) {
      download.body.destroy();
      throw new Errors.CLIError(Messages.unexpectedRange(start, download.contentRange));
    }
    return { download, from: start };
  } catch (err) {
    if (err instanceof ApiError && err.status === 416) return { download: await req.open(undefined, signal), from: 0 };
    throw err;
  }
}

/** The error when the content's SHA-256 differs from the ETag's; servers that send none are taken on trust. */
function checksumError(download: Download, actual: string, name: string): Errors.CLIError | undefined {
  const expected = etagSha256(download.etag);
  return expected && expected !== actual ? new Errors.CLIError(Messages.checksumMismatch(name, expected, actual), { exit: ExitCode.other }) : undefined;
}

/**
 * One download, to a file or stdout, for both `files download` and `shares download`. A file is
 * written to `<output>.xfer-part` and renamed once complete and its SHA-256 matches the ETag, so
 * the output path never holds a partial or corrupt file. On failure the partial file is deleted,
 * unless --continue asked to keep it for the next attempt (a corrupt one is deleted anyway).
 */
export async function saveDownload(req: DownloadRequest): Promise<SavedFile> {
  if (req.output === '-') {
    if (req.resume) throw usageError(Messages.continueToStdout);
    return toStdout(req);
  }
  // The output path when it can be known before the request, else once the stored name arrives.
  const dir = req.output === undefined ? '.' : await isDirectory(req.output) ? req.output : undefined;
  const targetOf = (stored: string | undefined) => dir === undefined ? req.output! : join(dir, localName(stored));
  const known = dir === undefined ? req.output! : req.storedName ? targetOf(await req.storedName()) : undefined;
  if (known) await refuseOverwrite(known, req.force);
  else if (req.resume) throw usageError(Messages.continueNeedsOutput);
  const start = req.resume && known ? await sizeOf(known + PART_SUFFIX) : 0;

  return abortable(async (signal, interrupted) => {
    let opened: { download: Download; from: number };
    try {
      opened = await openFrom(req, start, signal);
    } catch (err) {
      const caught = interrupted();
      throw caught ? interruptedError(caught, req.resume && start > 0 ? known! + PART_SUFFIX : null) : err;
    }
    const { download, from } = opened;
    const target = known ?? targetOf(download.fileName);
    if (!known) {
      try { await refuseOverwrite(target, req.force); } catch (err) { download.body.destroy(); throw err; }
    }
    const part = target + PART_SUFFIX;
    const name = basename(target);
    const hash = createHash('sha256');
    const progress = await byteProgress(req.progress, { label: name, bytes: from, bytesTotal: download.size === undefined ? undefined : from + download.size });
    let corrupt = false;
    try {
      if (from > 0) await hashFile(part, hash);
      await pipeline(
        download.body,
        (source: AsyncIterable<Uint8Array>) => tapped(source, (chunk) => { hash.update(chunk); progress.add(chunk.length); }),
        createWriteStream(part, { flags: from > 0 ? 'a' : 'w' }),
      );
      const sha256 = hash.digest('hex');
      const mismatch = checksumError(download, sha256, name);
      // A corrupt partial file cannot be resumed into a good one: it goes even with --continue.
      if (mismatch) { corrupt = true; throw mismatch; }
      const size = await sizeOf(part);
      await rename(part, target);
      return { file: resolve(target), name, size, sha256, resumed_from: from };
    } catch (err) {
      const keep = req.resume && !corrupt;
      if (!keep) await rm(part, { force: true });
      const caught = interrupted();
      throw caught ? interruptedError(caught, keep ? part : null) : err;
    } finally {
      progress.stop();
    }
  });
}

/** The content on stdout (for a pipe); progress stays on stderr. A bad checksum can only be reported, the bytes are out. */
async function toStdout(req: DownloadRequest): Promise<SavedFile> {
  return abortable(async (signal, interrupted) => {
    let progress: Awaited<ReturnType<typeof byteProgress>> | undefined;
    let name = '';
    let size = 0;
    const hash = createHash('sha256');
    try {
      const download = await req.open(undefined, signal);
      name = localName(download.fileName);
      progress = await byteProgress(req.progress, { label: name, bytes: 0, bytesTotal: download.size });
      const p = progress;
      await pipeline(download.body, (source: AsyncIterable<Uint8Array>) => tapped(source, (chunk) => { hash.update(chunk); size += chunk.length; p.add(chunk.length); }), process.stdout, { end: false });
      const sha256 = hash.digest('hex');
      const mismatch = checksumError(download, sha256, name);
      if (mismatch) throw mismatch;
      return { file: null, name, size, sha256, resumed_from: 0 };
    } catch (err) {
      const caught = interrupted();
      if (caught) throw interruptedError(caught, null);
      // The reader stopped early (`| head`): it had what it wanted. Stop quietly, like cat does,
      // rather than report a write error nobody caused.
      if ((err as NodeJS.ErrnoException).code === 'EPIPE') return { file: null, name, size, sha256: hash.digest('hex'), resumed_from: 0 };
      throw err;
    } finally {
      progress?.stop();
    }
  });
}

/** The human line after a download to a file. */
export function savedLine(saved: SavedFile): string {
  const size = formatBytes(saved.size);
  return saved.resumed_from > 0
    ? Messages.downloadedFrom(saved.file!, size, saved.sha256, formatBytes(saved.resumed_from))
    : Messages.downloaded(saved.file!, size, saved.sha256);
}

/**
 * The client's limit on silence, per chunk sent and then for the answer. After the last byte the
 * server still waits for clamd's verdict (XFER_CLAMD_TIMEOUT_MS, 120 s by default) and commits
 * the content: the client's default 60 s would report a timeout for an upload the server keeps.
 */
export const UPLOAD_TIMEOUT_MS = 300_000;

/**
 * Streams a local file (or stdin for `-`, which needs `name`) to `send` with a progress display
 * ("uploading", then "scanning" once every byte is sent): what every upload command shares.
 * Usage errors for a missing or non-regular file, and for stdin without a name.
 */
export async function uploadLocalFile<T>(
  local: string, opts: { name?: string; json: boolean; quiet: boolean },
  send: (source: { name: string; size?: number; content: AsyncIterable<Uint8Array> }, settings: { timeoutMs: number }) => Promise<T>,
): Promise<T> {
  const fromStdin = local === '-';
  if (fromStdin && !opts.name) throw usageError(Messages.stdinNeedsName);
  let size: number | undefined;
  if (!fromStdin) {
    const info = await stat(local).catch(() => undefined);
    if (!info) throw usageError(Messages.noLocalFile(local));
    if (!info.isFile()) throw usageError(Messages.notAFile(local));
    size = info.size;
  }
  const name = opts.name ?? basename(local);
  const source = fromStdin ? process.stdin : createReadStream(local);
  const progress = await byteProgress(progressMode({ json: opts.json, quiet: opts.quiet }), { label: name, state: 'uploading', bytes: 0, bytesTotal: size });
  try {
    async function* content() {
      yield* tapped(source, (chunk) => progress.add(chunk.length));
      // Every byte is sent: what remains is the server's malware scan.
      progress.set({ state: 'scanning' });
    }
    const result = await send({ name, size, content: content() }, { timeoutMs: UPLOAD_TIMEOUT_MS });
    progress.set({ state: 'uploaded' });
    return result;
  } catch (err) {
    progress.set({ state: 'failed' });
    throw err;
  } finally {
    progress.stop();
    if (!fromStdin) source.destroy();
  }
}
