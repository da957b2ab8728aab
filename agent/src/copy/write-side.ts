import { createHash, randomBytes } from 'node:crypto';
import type { Readable } from 'node:stream';
import type { FileResult, JobOptions, VerifiedFile } from '@xfer/shared';
import type { Logger } from 'pino';
import { baseName, joinRel, parentOf, relativePath } from '../connectors/paths.js';
import type { Checksum, Connector, WriteResult } from '../connectors/types.js';
import { CopyJobError, reasonOf, SourceChangedError, VerifyError } from './errors.js';
import { EarlierUploads, runTag, type RunRef } from './leftovers.js';
import { HashingStream, PreHashedBody } from './hashing.js';
import { multiStreamRead, SegmentBudget } from './multi-stream.js';
import { planFile } from './plan.js';
import { withRetries } from './retry.js';
import { truncate, type CopyStats } from './stats.js';
import type { CopyTuning, RunLimits, SourceItem } from './types.js';

export interface WriteSideOptions {
  destination: Connector;
  destinationPath: string;
  options: JobOptions;
  run?: RunRef;
  signal: AbortSignal;
  stats: CopyStats;
  tuning: CopyTuning;
  log?: Logger;
  /** The run's bandwidth limit (issue 25): each file's body is paced before the hash. */
  limits?: RunLimits;
}

/** Longest file name (bytes) that still gets its name inside the temporary name; longer ones would pass NAME_MAX. */
const MAX_NAME_IN_TEMP = 200;
const MAX_FILE_ERROR_CHARS = 2000;

/**
 * The destination half of the engine: consumes source items (from the read side here, from a
 * relay later) and makes each one appear at the destination complete and verified, or not at all.
 *
 * Per file: plan against what is there (overwrite policy, resume) → stream through the hashing
 * pass-through → write to a temporary name in the same directory where the store can rename
 * (else straight to the final name: object stores commit atomically) → verify → rename.
 * Transient faults and verification mismatches are retried with backoff; anything else fails the
 * file at once. Whatever fails or is cancelled, the temporary file is removed.
 */
export class WriteSide {
  private readonly root: string;
  /**
   * MD5 is computed only for stores that report one and do not check each write themselves: from
   * the start for object stores, and from the first file that shows one. (A second MD5 pass over
   * every byte costs as much CPU as reading them over SSH.)
   */
  private wantMd5: boolean;
  /** Open multipart uploads below the destination from before this run (object stores). */
  private earlier: EarlierUploads | null = null;
  /** What the run's multi-stream reads may hold at once (copy/multi-stream.ts). */
  private readonly segments: SegmentBudget;

  constructor(private readonly o: WriteSideOptions) {
    this.root = relativePath(o.destinationPath);
    const { rename, verifiesWrites } = o.destination.capabilities;
    this.wantMd5 = !rename && !verifiesWrites;
    const { budgetBytes, segmentBytes } = o.tuning.multiStream;
    this.segments = new SegmentBudget(Math.floor(budgetBytes / segmentBytes));
  }

  /** Creates the destination directory. A file in its place fails the job. */
  async prepare(): Promise<void> {
    this.earlier = await EarlierUploads.find(this.o.destination, this.root, this.o.signal, this.o.log);
    if (this.root === '') return;
    const existing = await this.o.destination.stat(this.root, { signal: this.o.signal });
    if (existing?.kind === 'file') throw new CopyJobError(`destination path ${this.o.destinationPath} is a file, not a directory`);
    if (!existing) await this.retrying('', () => this.o.destination.mkdir(this.root, { signal: this.o.signal }));
  }

  /** Handles one item and records its outcome; never rejects. Nothing is recorded for an item cut short by a cancel. */
  async consume(item: SourceItem): Promise<void> {
    if (item.entry.kind === 'directory') {
      await this.directory(item);
      return;
    }
    const result = await this.file(item);
    if (result) this.o.stats.fileDone(result);
  }

  private async directory(item: SourceItem): Promise<void> {
    const path = joinRel(this.root, item.path);
    try {
      await this.retrying(item.path, () => this.o.destination.mkdir(path, { signal: this.o.signal }));
    } catch (err) {
      if (!this.o.signal.aborted) this.o.stats.failed(`${item.path}/`, reasonOf(err));
    }
  }

  /**
   * Copies one file whose fate the comparison decided already (copy/sync-engine.ts): no stat, no
   * overwrite policy, the same temporary name, verification and retries. Null when cut short by a
   * cancel; the caller records the result.
   */
  copyDecided(item: SourceItem): Promise<FileResult | null> {
    return this.file(item, true);
  }

  /** Removes one file (a `sync` deletion, a `move`'s source) with the run's retries; rejects with the last error. */
  removeWithRetries(connector: Connector, path: string, shown: string): Promise<void> {
    return this.retrying(shown, () => connector.remove(path, { signal: this.o.signal }));
  }

  private async file(item: SourceItem, decided = false): Promise<FileResult | null> {
    const destPath = joinRel(this.root, item.path);
    const { destination, options, signal } = this.o;
    let attempts = 0;
    await this.earlier?.reached(destPath);
    try {
      return await this.retrying(item.path, async () => {
        attempts++;
        // `always` needs to know nothing of the destination (a stat per file is a round trip,
        // and on object stores a 404 per new file); a file an earlier attempt verified does.
        if (decided) return await this.copyOnce(item, destPath);
        const needsStat = options.overwrite !== 'always' || item.earlier !== undefined;
        const existing = needsStat ? await destination.stat(destPath, { signal }) : null;
        const plan = planFile(item.entry, existing, options.overwrite, item.earlier);
        if (plan.action === 'skip') return skipped(item, plan.verifiedBy);
        if (plan.action === 'fail') throw new CopyJobError(plan.reason);
        return await this.copyOnce(item, destPath);
      });
    } catch (err) {
      if (signal.aborted) return null;
      const reason = reasonOf(err) + (attempts > 1 ? ` (after ${attempts} attempts)` : '');
      this.o.log?.warn({ file: item.path, err: reason }, 'file failed');
      return { path: item.path, status: 'failed', size: item.entry.size, error: truncate(reason, MAX_FILE_ERROR_CHARS) };
    }
  }

  private async copyOnce(item: SourceItem, destPath: string): Promise<FileResult> {
    const copied = await this.serverCopy(item, destPath);
    if (copied) return copied;
    const { destination, stats } = this.o;
    const size = item.entry.size;
    const useTemp = destination.capabilities.rename;
    const target = useTemp ? tempPathFor(destPath, this.o.run) : destPath;
    // One controller per attempt: a failure on either side stops the other at once.
    const attempt = new AbortController();
    const signal = AbortSignal.any([this.o.signal, attempt.signal]);
    let counted = 0;
    const hasher = new HashingStream({ md5: this.wantMd5, expectedBytes: size, onBytes: (n) => { counted += n; stats.bytes(n); } });
    // Errors of the hasher reach the destination's write (its body); this only keeps a late one from going unhandled.
    hasher.on('error', () => {});
    let source: Readable | undefined;
    let sourceError: unknown = null;
    let written = false;
    try {
      source = await this.open(item, signal);
      // A relayed body was hashed (and checked against the source's SHA-256) as it arrived: not hashed twice.
      if (source instanceof PreHashedBody) hasher.takeSha256From(source);
      // Bandwidth limit (issue 25, copy/bandwidth.ts): the body itself when none applies; a body's errors come out of the paced stream.
      if (this.o.limits) source = this.o.limits.pace(source, signal);
      source.on('error', (err) => {
        sourceError ??= err;
        hasher.destroy(err);
      });
      // A cancel may land while the source opens: no write starts after it (a store need not check
      // an already-aborted signal before it begins), and the catch below closes the source.
      signal.throwIfAborted();
      source.pipe(hasher);
      const result = await destination.write(target, hasher, { size, signal, modifiedAt: await this.keptTime(item, signal), readBack: this.o.options.verify === 'checksum' });
      written = true;
      if (hasher.sourceError || sourceError) throw hasher.sourceError ?? sourceError;
      if (!hasher.readableEnded) throw new VerifyError('the destination stopped reading before the end of the file');
      if (hasher.bytes !== size) throw new SourceChangedError(`source changed during copy: listed ${size} bytes, read ${hasher.bytes}`);
      const digests = hasher.digests();
      const verifiedBy = await this.verify(target, result, digests, size, signal);
      if (useTemp) await destination.rename(target, destPath, { signal });
      return { path: item.path, status: 'copied', size, sha256: digests.sha256, verified_by: verifiedBy };
    } catch (err) {
      // Decided before aborting: the abort makes the source stream error too, and that is not the cause.
      const cause = hasher.sourceError ?? sourceError ?? err;
      attempt.abort();
      source?.destroy();
      hasher.destroy();
      stats.bytes(-counted);
      // No signal: the clean-up must also run after a cancel. An object store's failed write left nothing
      // (and its final name may still hold the previous version), so only a written object is removed.
      if (useTemp || written) {
        await destination.remove(target).catch((e: unknown) => this.o.log?.error({ file: target, err: reasonOf(e) }, 'could not remove a partial file'));
      }
      throw cause;
    }
  }

  /** The file's bytes: from several ranged reads at once when it is large and the source reads ranges (copy/multi-stream.ts). */
  private async open(item: SourceItem, signal: AbortSignal): Promise<Readable> {
    const { multiStream } = this.o.tuning;
    const size = item.entry.size;
    if (!item.rangeReader || multiStream.streams < 2 || size < multiStream.cutoffBytes) return item.open(signal);
    return multiStreamRead(item.rangeReader, size, { tuning: multiStream, budget: this.segments, retry: this.o.tuning, signal });
  }

  /**
   * The store copies the file itself when source and destination are the same store and account
   * (`Connector.copyFrom`; docs/connectors.md "Server-side copies"): no byte through the agent, no
   * bandwidth limit to pace, verified by the store's checksum against the listed source. Null when
   * the destination cannot here: the bytes are moved instead. The run's byte count includes what
   * the store copied (it is done), and the file's result has no `sha256`: the agent never saw the bytes.
   */
  private async serverCopy(item: SourceItem, destPath: string): Promise<FileResult | null> {
    const { destination, stats, signal } = this.o;
    if (!item.at || !destination.copyFrom) return null;
    const result = await destination.copyFrom(item.at.connector, item.at.path, destPath, {
      entry: item.entry, signal, modifiedAt: () => this.keptTime(item, signal),
      tempPath: tempPathFor(destPath, this.o.run), verify: this.o.options.verify,
    });
    if (!result) return null;
    if (result.size !== item.entry.size) throw new VerifyError(`the destination stored ${result.size} bytes of ${item.entry.size}`);
    stats.bytes(item.entry.size);
    return { path: item.path, status: 'copied', size: item.entry.size, verified_by: result.storeVerified ?? 'size' };
  }

  /**
   * The source's modification time for the destination to keep: the listing's, or, where the
   * listing shows the store's write time instead (`modifiedAtNeedsStat`: S3), the kept one a stat
   * returns — else a plain copy from objects rclone or xfer wrote would stamp every file with its
   * upload time, and the next `size_mtime` comparison would copy them all again. Only asked when
   * the destination keeps times; a failed stat falls back to the listing's time.
   */
  private async keptTime(item: SourceItem, signal: AbortSignal): Promise<Date | undefined> {
    const keeps = (this.o.destination.capabilities.modTime ?? 'none') !== 'none';
    if (!keeps || !item.entry.modifiedAtNeedsStat || !item.keptModifiedAt) return item.entry.modifiedAt;
    return (await item.keptModifiedAt(signal).catch(() => undefined)) ?? item.entry.modifiedAt;
  }

  /**
   * Checks that the destination holds what was sent; returns how (`sha256`, `md5`, `etag`, the
   * connector's `storeVerified` such as `md5-parts`, `size` or `reread`). Prefers the store's own
   * checksum, from the write or from a stat; without one, the size must match and with
   * `verify = checksum` the written file is read back.
   */
  private async verify(target: string, result: WriteResult, digests: { sha256: string; md5: string | null }, size: number, signal: AbortSignal): Promise<string> {
    const { destination, options } = this.o;
    if (result.size !== size) throw new VerifyError(`the destination stored ${result.size} bytes of ${size}`);
    let sum = comparable(result.checksum, digests) ? result.checksum : undefined;
    if (!sum && result.storeVerified) return result.storeVerified;
    // A file store (rename-capable) has no checksum to show on a stat, and the re-read below checks
    // size and content: its stat would be one more round trip per file for nothing.
    const reread = options.verify === 'checksum';
    // Read back by the connector through the handle it wrote with (WriteOptions.readBack).
    if (!sum && reread && result.readBack) return rereadVerdict(result.readBack, size, digests.sha256);
    if (!sum && !(reread && destination.capabilities.rename)) {
      const stored = await destination.stat(target, { signal });
      if (!stored || stored.kind !== 'file') throw new VerifyError('the written file is missing at the destination');
      if (stored.size !== size) throw new VerifyError(`the destination holds ${stored.size} bytes of ${size}`);
      if (comparable(stored.checksum, digests)) sum = stored.checksum;
      else if (isMd5Like(result.checksum) || isMd5Like(stored.checksum)) this.wantMd5 = true;
    }
    if (sum) {
      const expected = sum.algorithm === 'sha256' ? digests.sha256 : digests.md5;
      if (sum.value.toLowerCase() !== expected) throw new VerifyError(`${sum.algorithm} of the written file does not match the bytes sent`);
      return sum.algorithm;
    }
    if (!reread) return 'size';
    const body = await destination.read(target, { signal });
    const hash = createHash('sha256');
    let bytes = 0;
    for await (const chunk of body as AsyncIterable<Buffer>) {
      hash.update(chunk);
      bytes += chunk.length;
    }
    return rereadVerdict({ sha256: hash.digest('hex'), bytes }, size, digests.sha256);
  }

  private retrying<T>(path: string, attempt: () => Promise<T>): Promise<T> {
    const { tuning, signal, log } = this.o;
    return withRetries(attempt, {
      retries: tuning.retries, baseMs: tuning.retryBaseMs, maxMs: tuning.retryMaxMs, signal,
      onRetry: (err, n, delayMs) => log?.info({ file: path, attempt: n, delay_ms: delayMs, err: reasonOf(err) }, 'retrying'),
    });
  }
}

/**
 * `.<name>.xfer-<run tag>-t<start>-<random>.part` beside the final name: hidden, unique, renamed
 * within one directory, saying which job and attempt wrote it and when the write started
 * (leftovers.ts finds those of earlier runs, and tells abandoned ones by the later of that start
 * and the file's mtime, which a kept modification time sets into the past).
 */
export function tempPathFor(destPath: string, run?: RunRef, now = Date.now()): string {
  const name = baseName(destPath);
  const random = `${run ? `${runTag(run)}-` : ''}t${now.toString(36)}-${randomBytes(6).toString('hex')}`;
  const temp = Buffer.byteLength(name) <= MAX_NAME_IN_TEMP ? `.${name}.xfer-${random}.part` : `.xfer-${random}.part`;
  return joinRel(parentOf(destPath), temp);
}

/**
 * A skipped file's result. One an earlier attempt verified says so: `verified_by` is
 * `attempt <n>` and `sha256` the one that attempt recorded (docs/api.md "per-file results").
 */
function skipped(item: SourceItem, verifiedBy: VerifiedFile | undefined): FileResult {
  const result: FileResult = { path: item.path, status: 'skipped', size: item.entry.size };
  if (!verifiedBy) return result;
  return { ...result, verified_by: `attempt ${verifiedBy.attempt}`, ...(verifiedBy.sha256 ? { sha256: verifiedBy.sha256 } : {}) };
}

function isMd5Like(sum: Checksum | undefined): boolean {
  return !!sum && (sum.algorithm === 'md5' || (sum.algorithm === 'etag' && /^[0-9a-f]{32}$/i.test(sum.value)));
}

/** A store checksum the engine computed the same thing for. crc32c is not computed (yet): size + re-read instead. */
function comparable(sum: Checksum | undefined, digests: { md5: string | null }): sum is Checksum {
  if (!sum) return false;
  if (sum.algorithm === 'sha256') return true;
  return digests.md5 !== null && isMd5Like(sum);
}

/** The written file as read back (by the engine or the connector) against the bytes sent. */
function rereadVerdict(read: { sha256: string; bytes: number }, size: number, sha256: string): 'reread' {
  if (read.bytes !== size || read.sha256 !== sha256) throw new VerifyError('the written file read back does not match the bytes sent (sha256)');
  return 'reread';
}
