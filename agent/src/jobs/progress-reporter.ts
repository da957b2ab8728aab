import type { FileResult } from '@xfer/shared';
import type { CopyCounters, CopyObserver } from '../copy/types.js';
import { progressPayload, type ProgressPayload } from './payloads.js';

export interface ProgressReporterOptions {
  /** A message goes out as soon as this many files finished since the last one (api.md: every 5 files). */
  filesPerMessage?: number;
  /** ...and at least this often while anything changes (bytes moving, listing growing). */
  intervalMs?: number;
}

/**
 * Turns the engine's callbacks into throttled `job.progress` payloads: one at every
 * `filesPerMessage` finished files, and one per `intervalMs` while counters move, each with the
 * cumulative counters and the FileResults finished since the previous one.
 */
export class ProgressReporter implements CopyObserver {
  private batch: FileResult[] = [];
  private dirty = false;
  private counters: Readonly<CopyCounters> | null = null;
  private timer: NodeJS.Timeout | null = null;
  private readonly filesPerMessage: number;
  private readonly intervalMs: number;

  constructor(
    private readonly jobId: string,
    private readonly emit: (payload: ProgressPayload) => void,
    options: ProgressReporterOptions = {},
  ) {
    this.filesPerMessage = options.filesPerMessage ?? 5;
    this.intervalMs = options.intervalMs ?? 1000;
  }

  start(): void {
    this.timer = setInterval(() => {
      if (this.dirty || this.batch.length > 0) this.flush();
    }, this.intervalMs);
    this.timer.unref();
  }

  fileDone(result: FileResult, counters: Readonly<CopyCounters>): void {
    this.counters = counters;
    this.batch.push(result);
    if (this.batch.length >= this.filesPerMessage) this.flush();
  }

  changed(counters: Readonly<CopyCounters>): void {
    this.counters = counters;
    this.dirty = true;
  }

  /** Stops the timer and sends what is pending, so every FileResult goes out before the terminal message. */
  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    if (this.dirty || this.batch.length > 0) this.flush();
  }

  private flush(): void {
    if (!this.counters) return;
    const files = this.batch;
    this.batch = [];
    this.dirty = false;
    this.emit(progressPayload(this.jobId, this.counters, files));
  }
}
