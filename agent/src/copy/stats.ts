import type { FileResult } from '@xfer/shared';
import type { CopyCounters, CopyObserver } from './types.js';

/** Failing files named in a job's error message; the rest are counted ("and N more"). */
export const NAMED_FAILURES = 5;
/** `job.failed.error` is at most this long (protocol limit). */
const MAX_ERROR_CHARS = 4000;

/**
 * Counters of one run and the first few failures. Only counts and a fixed number of failures are
 * kept, so memory does not grow with the number of files.
 */
export class CopyStats {
  readonly counters: CopyCounters = {
    files_total: 0, files_transferred: 0, files_skipped: 0, files_failed: 0, files_deleted: 0, bytes_transferred: 0, listing_done: false,
  };
  private readonly named: { path: string; reason: string }[] = [];
  private failures = 0;

  constructor(private readonly observer: CopyObserver = {}) {}

  fileListed(): void {
    this.counters.files_total++;
    this.observer.changed?.(this.counters);
  }

  listingDone(): void {
    this.counters.listing_done = true;
    this.observer.changed?.(this.counters);
  }

  /** Bytes that passed the hash; negative to take back a failed attempt's bytes. */
  bytes(delta: number): void {
    this.counters.bytes_transferred += delta;
    this.observer.changed?.(this.counters);
  }

  fileDone(result: FileResult): void {
    if (result.status === 'copied') this.counters.files_transferred++;
    else if (result.status === 'skipped') this.counters.files_skipped++;
    else if (result.status === 'deleted') this.counters.files_deleted++;
    else {
      this.counters.files_failed++;
      this.failed(result.path, result.error ?? 'failed');
    }
    this.observer.fileDone?.(result, this.counters);
  }

  /** A file skipped as equal at both ends (`Decision.unchanged`): counted, with no per-file result. */
  fileUnchanged(): void {
    this.counters.files_skipped++;
    this.observer.changed?.(this.counters);
  }

  /** A failure that is not a file's (a directory that could not be created). */
  failed(path: string, reason: string): void {
    this.failures++;
    if (this.named.length < NAMED_FAILURES) this.named.push({ path, reason });
  }

  get failureCount(): number {
    return this.failures;
  }

  /** "2 files failed: a.txt (reason); b/c.bin (reason)", naming at most five, then "and N more". */
  failureMessage(): string {
    const list = this.named.map((f) => `${f.path} (${f.reason})`).join('; ');
    const more = this.failures - this.named.length;
    const text = `${this.failures} ${this.failures === 1 ? 'file' : 'files'} failed: ${list}${more > 0 ? `; and ${more} more` : ''}`;
    return truncate(text, MAX_ERROR_CHARS);
  }
}

export function truncate(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}
