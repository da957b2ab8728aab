import { Readable } from 'node:stream';
import type { RangeReader } from '../connectors/types.js';
import { withRetries } from './retry.js';
import type { CopyTuning } from './types.js';

/**
 * Several streams for one large file (issue 26; docs/agent.md "Several streams per file"): the
 * file is cut into segments read with ranged reads, up to `streams` at once, and handed on in
 * order as one stream. The destination and the end-to-end SHA-256 see the bytes as from a single
 * read; what changes is that a store answering each stream at its own pace (latency, a per-stream
 * limit) is asked for several ranges at a time, as rclone's multi-thread copies and Globus's
 * parallelism do.
 *
 * Memory: each segment being read or waiting its turn holds up to `segmentBytes`, and every
 * segment of every file of the run takes a share of one budget (`SegmentBudget`) first, so a run
 * buffers at most `budgetBytes` whatever the number and size of its files. A segment that fails
 * is read again from its start (transient errors, the run's retry settings); a segment that keeps
 * failing fails the stream, and the engine retries the whole file as for any other read.
 *
 * Each stream opens the file once (Connector.rangeReader) and reads its segments through it, so
 * a store whose open is a round trip of its own (sftp) pays it per stream, not per segment.
 */
export interface MultiStreamTuning {
  /** Files of at least this size are read in several streams (rclone's `--multi-thread-cutoff`). */
  cutoffBytes: number;
  /** Ranged reads at once per file. */
  streams: number;
  /** Bytes of one ranged read. */
  segmentBytes: number;
  /** Bytes of segments a run holds at once, all files together. */
  budgetBytes: number;
}

export const DEFAULT_MULTI_STREAM: MultiStreamTuning = {
  cutoffBytes: 64 * 1024 * 1024,
  streams: 4,
  segmentBytes: 4 * 1024 * 1024,
  budgetBytes: 16 * 1024 * 1024,
};

/** Opens the file for ranged reads: one reader per stream (Connector.rangeReader). */
export type OpenReader = (signal: AbortSignal) => Promise<RangeReader>;

/** The run's segment budget: a counting semaphore of segments, granted in the order asked. */
export class SegmentBudget {
  private free: number;
  private readonly waiting: Array<() => void> = [];

  constructor(readonly segments: number) {
    this.free = Math.max(1, segments);
  }

  async acquire(signal: AbortSignal): Promise<void> {
    signal.throwIfAborted();
    if (this.free > 0) {
      this.free--;
      return;
    }
    await new Promise<void>((resolve, reject) => {
      const grant = () => {
        signal.removeEventListener('abort', onAbort);
        resolve();
      };
      const onAbort = () => {
        const i = this.waiting.indexOf(grant);
        if (i >= 0) this.waiting.splice(i, 1);
        reject(signal.reason);
      };
      this.waiting.push(grant);
      signal.addEventListener('abort', onAbort, { once: true });
    });
  }

  release(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.free++;
  }
}

/**
 * The file's `size` bytes read in segments, several at once, as one ordered stream. The stream
 * errors with the error of a segment that failed past its retries; destroying it (or aborting
 * `signal`) stops every read and gives back the budget.
 */
export function multiStreamRead(openReader: OpenReader, size: number, o: {
  tuning: MultiStreamTuning; budget: SegmentBudget; retry: Pick<CopyTuning, 'retries' | 'retryBaseMs' | 'retryMaxMs'>; signal: AbortSignal;
}): Readable {
  const { segmentBytes } = o.tuning;
  const count = Math.ceil(size / segmentBytes);
  const stop = new AbortController();
  const signal = AbortSignal.any([o.signal, stop.signal]);
  /** Segments read and not yet handed on, by index; each holds one share of the budget. */
  const done = new Map<number, Buffer[]>();
  const waiters = new Map<number, () => void>();
  let claimed = 0;
  let failure: unknown;

  /** A stream's open file: made on its first segment, made again after a failed read. */
  class StreamReader {
    private reader: RangeReader | null = null;

    async segment(index: number): Promise<Buffer[]> {
      const start = index * segmentBytes;
      const end = Math.min(size, start + segmentBytes) - 1;
      return withRetries(async () => {
        const chunks: Buffer[] = [];
        let bytes = 0;
        try {
          this.reader ??= await openReader(signal);
          const body = await this.reader.read(start, end, signal);
          for await (const chunk of body as AsyncIterable<Buffer>) {
            chunks.push(chunk);
            bytes += chunk.length;
          }
        } catch (err) {
          // The file is opened again for the retry (its connection may be what failed).
          await this.close();
          throw err;
        }
        // A short range is the file shrinking under us: the engine's size check reports it.
        if (bytes > end - start + 1) throw new Error(`a ranged read returned ${bytes} bytes for ${end - start + 1}`);
        return chunks;
      }, { retries: o.retry.retries, baseMs: o.retry.retryBaseMs, maxMs: o.retry.retryMaxMs, signal });
    }

    async close(): Promise<void> {
      const reader = this.reader;
      this.reader = null;
      await reader?.close();
    }
  }

  async function worker(): Promise<void> {
    const reader = new StreamReader();
    try {
      for (;;) {
        // The share is taken before the segment is claimed: segments are claimed in order, so the one
        // the output waits for always has its share and progresses (no deadlock between files).
        await o.budget.acquire(signal);
        if (claimed >= count || failure !== undefined) {
          o.budget.release();
          return;
        }
        const index = claimed++;
        try {
          done.set(index, await reader.segment(index));
        } catch (err) {
          o.budget.release();
          throw err;
        }
        waiters.get(index)?.();
      }
    } finally {
      await reader.close();
    }
  }

  async function* ordered(): AsyncGenerator<Buffer> {
    const workers = Array.from({ length: Math.min(o.tuning.streams, count) }, () => worker().catch((err: unknown) => {
      failure ??= err;
      stop.abort(err);
      for (const wake of waiters.values()) wake();
    }));
    try {
      for (let index = 0; index < count; index++) {
        if (!done.has(index) && failure === undefined) await new Promise<void>((resolve) => waiters.set(index, resolve));
        waiters.delete(index);
        if (failure !== undefined) throw failure;
        const chunks = done.get(index)!;
        done.delete(index);
        try {
          for (const chunk of chunks) yield chunk;
        } finally {
          o.budget.release();
        }
      }
    } finally {
      // Stopped early (destroyed, failed): no read goes on, and the segments read ahead give their share back.
      stop.abort(failure ?? new Error('multi-stream read stopped'));
      await Promise.all(workers);
      for (const [index] of done) {
        done.delete(index);
        o.budget.release();
      }
    }
  }

  return Readable.from(ordered(), { objectMode: false, highWaterMark: 0 });
}
