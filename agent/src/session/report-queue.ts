import { appendFileSync, mkdirSync, readdirSync, readFileSync, rmSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';
import type { AgentMessage } from '@xfer/shared';
import type { Logger } from 'pino';

/** The job reports kept until the control plane acknowledges them. */
export type JobReport = Extract<AgentMessage, { type: 'job.progress' | 'job.completed' | 'job.failed' | 'job.cancelled' }>;
/** The new file versions of a watcher's poll (watch/watch-runner.ts), kept the same way. */
export type WatchReport = Extract<AgentMessage, { type: 'watch.found' }>;
/** Every message the queue numbers and holds until acknowledged. */
export type HeldMessage = JobReport | WatchReport;

const HELD_TYPES = new Set(['job.progress', 'job.completed', 'job.failed', 'job.cancelled', 'watch.found']);
/** The protocol's cap on FileResults per progress message. */
const MAX_FILES = 1000;

/** Whether `message` is numbered and held until acknowledged (a job report or a `watch.found`). */
export function isHeldReport(message: AgentMessage): message is HeldMessage {
  return HELD_TYPES.has(message.type);
}

export interface ReportQueueOptions {
  /** Where reports past the memory bound are spilled (this process's own directory); null: never spill. */
  dir: string | null;
  /** Bytes of serialized reports held in memory before new ones go to disk. */
  memoryBytes: number;
  log: Logger;
}

/** One held report. */
export interface HeldReport {
  seq: number;
  message: HeldMessage;
  bytes: number;
}

interface Segment {
  path: string;
  bytes: number;
}

/**
 * Every job report (progress with its file results, and each job's end) and every `watch.found`
 * (new file versions a watcher's poll found) from the moment it is produced until the control
 * plane acknowledges it (`ack`, after it persisted it), numbered (`seq`) so the acknowledgement
 * names it. Memory holds the oldest reports up to `memoryBytes`;
 * newer ones are appended to segment files (JSON lines) in `dir`, and read back, oldest segment
 * first, once acknowledgements free room — so order is kept and memory stays bounded however long
 * the control plane is away. While a report is unsent, a newer progress of the same job is merged
 * into it (latest counters, file results appended up to the protocol's 1000), so a long outage
 * costs one report per 1000 files, not one per 5. `watch.found` is never merged: a poll already
 * sends up to 1000 versions a message.
 *
 * Nothing here survives a restart of the agent: its runs end with the process (the control plane
 * fails them as lost; a retry resumes), so their reports would only be refused; its watchers start
 * over from the control plane's `report_since`, which covers what was found and not acknowledged.
 */
export class ReportQueue {
  private nextSeq = 1;
  private readonly memory = new Map<number, HeldReport>();
  /** Of `memory`, those not written to the current socket, in order (insertion order is seq order). */
  private readonly unsentSeqs = new Set<number>();
  private memoryBytes = 0;
  /** Spilled reports, oldest first; the last one is appended to. */
  private readonly segments: Segment[] = [];
  /** Job reports held per job (memory and disk): `heldJobs`. */
  private readonly perJob = new Map<string, number>();
  private spillFailed = false;
  private dirMade = false;

  constructor(private readonly o: ReportQueueOptions) {}

  /** Numbers `message` (sets `payload.seq`) and holds it; returns what is held for it. */
  add(message: HeldMessage): HeldReport | null {
    const merged = this.mergeIntoTail(message);
    if (merged) return merged;
    const numbered = { ...message, payload: { ...message.payload, seq: this.nextSeq++ } } as HeldMessage;
    const held: HeldReport = { seq: numbered.payload.seq!, message: numbered, bytes: Buffer.byteLength(JSON.stringify(numbered)) };
    const job = jobOf(message);
    if (job !== null) this.perJob.set(job, (this.perJob.get(job) ?? 0) + 1);
    // Never spill into an empty memory: what is on disk is read back only when acknowledgements free room.
    if (this.memory.size > 0 && (this.segments.length > 0 || this.memoryBytes + held.bytes > this.o.memoryBytes)) {
      if (this.spill(held)) return null;
    }
    this.hold(held);
    return held;
  }

  /** Forgets acknowledged reports, and reads spilled ones back when there is room. */
  ack(seqs: readonly number[]): void {
    for (const seq of seqs) {
      const held = this.memory.get(seq);
      if (!held) continue;
      this.memory.delete(seq);
      this.unsentSeqs.delete(seq);
      this.memoryBytes -= held.bytes;
      const job = jobOf(held.message);
      if (job === null) continue;
      const left = (this.perJob.get(job) ?? 1) - 1;
      if (left > 0) this.perJob.set(job, left);
      else this.perJob.delete(job);
    }
    while (this.segments.length > 0 && this.memoryBytes < this.o.memoryBytes / 2) this.load(this.segments.shift()!);
  }

  /** The socket closed: everything held goes out again after the next welcome. */
  unsendAll(): void {
    this.unsentSeqs.clear();
    for (const seq of this.memory.keys()) this.unsentSeqs.add(seq);
  }

  /** Takes the held reports not yet written to the current socket, in order (they count as sent from now). */
  takeUnsent(): HeldReport[] {
    const out = [...this.unsentSeqs].map((seq) => this.memory.get(seq)!);
    this.unsentSeqs.clear();
    return out;
  }

  /** Jobs with reports not acknowledged yet (`hello.held_jobs`). */
  heldJobs(): string[] {
    return [...this.perJob.keys()];
  }

  /** Reports held, in memory and on disk (0: everything was acknowledged). */
  get size(): number {
    return this.memory.size + this.segments.length;
  }

  /** Removes the spill directory and what is in it (at exit). */
  discard(): void {
    this.segments.splice(0);
    if (this.o.dir) rmSync(this.o.dir, { recursive: true, force: true });
  }

  private mergeIntoTail(message: HeldMessage): HeldReport | null {
    if (message.type !== 'job.progress' || this.segments.length > 0) return null;
    // Without segments, the newest report (if still held) is in memory.
    const tail = this.memory.get(this.nextSeq - 1);
    if (!tail || !this.unsentSeqs.has(tail.seq) || tail.message.type !== 'job.progress' || tail.message.payload.job_id !== message.payload.job_id) return null;
    const files = [...tail.message.payload.files, ...message.payload.files];
    if (files.length > MAX_FILES) return null;
    tail.message = { ...message, id: tail.message.id, payload: { ...message.payload, files, seq: tail.seq } };
    const bytes = Buffer.byteLength(JSON.stringify(tail.message));
    this.memoryBytes += bytes - tail.bytes;
    tail.bytes = bytes;
    return tail;
  }

  /** Appends to the newest segment (a new one once it holds a quarter of the memory bound). False when the disk refused. */
  private spill(held: HeldReport): boolean {
    if (!this.o.dir || this.spillFailed) return false;
    try {
      if (!this.dirMade) {
        mkdirSync(this.o.dir, { recursive: true, mode: 0o700 });
        this.dirMade = true;
      }
      let segment = this.segments.at(-1);
      if (!segment || segment.bytes >= this.o.memoryBytes / 4) {
        segment = { path: join(this.o.dir, `reports-${String(held.seq).padStart(12, '0')}.jsonl`), bytes: 0 };
        this.segments.push(segment);
      }
      appendFileSync(segment.path, `${JSON.stringify(held.message)}\n`, { mode: 0o600 });
      segment.bytes += held.bytes + 1;
      return true;
    } catch (err) {
      // Kept in memory instead: losing a report is worse than exceeding the bound.
      this.spillFailed = true;
      this.o.log.error({ err: (err as Error).message, dir: this.o.dir }, 'cannot spill reports to disk; keeping them in memory');
      return false;
    }
  }

  private load(segment: Segment): void {
    const text = readFileSync(segment.path, 'utf8');
    unlinkSync(segment.path);
    for (const line of text.split('\n')) {
      if (!line) continue;
      const message = JSON.parse(line) as HeldMessage;
      this.hold({ seq: message.payload.seq!, message, bytes: Buffer.byteLength(line) });
    }
  }

  private hold(held: HeldReport): void {
    this.memory.set(held.seq, held);
    this.unsentSeqs.add(held.seq);
    this.memoryBytes += held.bytes;
  }
}

/** The job a held message reports on; null for a `watch.found`. */
function jobOf(message: HeldMessage): string | null {
  return message.type === 'watch.found' ? null : message.payload.job_id;
}

/**
 * This process's spill directory under the agent's state directory, after removing those of
 * agent processes that no longer run (a kill -9 leaves its directory behind).
 */
export function spillDir(stateDir: string, log: Logger): string {
  const root = join(stateDir, 'outbox');
  try {
    for (const name of readdirSync(root)) {
      const pid = Number(/^(\d+)$/.exec(name)?.[1]);
      if (pid && pid !== process.pid && !alive(pid)) rmSync(join(root, name), { recursive: true, force: true });
    }
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') log.warn({ err: (err as Error).message, dir: root }, 'cannot clean the outbox directory');
  }
  const own = join(root, String(process.pid));
  rmSync(own, { recursive: true, force: true });
  return own;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
