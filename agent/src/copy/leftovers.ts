import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import { baseName } from '../connectors/paths.js';
import type { Connector, OpenUpload } from '../connectors/types.js';
import { reasonOf } from './errors.js';

/** The run a write belongs to: its temporary names say so (see `runTag`). */
export interface RunRef {
  jobId: string;
  attempt: number;
}

/** A temporary file not written for this long (its mtime, and the start in its name) belongs to nobody any more, whatever job left it. */
export const STALE_PART_MS = 60 * 60 * 1000;
/** An open multipart upload started this long ago (store clock) is abandoned, whatever job left it. */
export const STALE_UPLOAD_MS = 24 * 60 * 60 * 1000;
/** Open uploads of earlier runs kept in memory for their keys (the rest are left to the age rule). */
const MAX_EARLIER_UPLOADS = 10_000;

/** `j<10 hex of SHA-256(job id)>a<attempt>`: in every temporary name, so a later run knows whose it is. */
export function runTag(run: RunRef): string {
  return `j${createHash('sha256').update(run.jobId).digest('hex').slice(0, 10)}a${run.attempt}`;
}

/**
 * `.<name>.xfer-[<run tag>-][t<start, base-36 ms>-]<12 hex>.part` (the tag and the start are absent
 * in names of agents before them).
 */
const TEMP_NAME = /^\..*xfer-(?:(j[0-9a-f]{10})a(\d+)-)?(?:t([0-9a-z]{1,11})-)?[0-9a-f]{12}\.part$/;

/** Whether `name` is one of the engine's temporary names, of which job and attempt, and when its write started. */
export function parseTempName(name: string): { job: string | null; attempt: number | null; startedAt?: number } | null {
  const m = TEMP_NAME.exec(name);
  if (!m) return null;
  return { job: m[1] ?? null, attempt: m[2] ? Number(m[2]) : null, ...(m[3] ? { startedAt: parseInt(m[3], 36) } : {}) };
}

/**
 * When a temporary file was last known alive: the later of its mtime and the start its name records.
 * The name matters since connectors keep modification times (issue 25): a finished write carries
 * its source's old mtime until the rename, and must not look abandoned to another job's sweep then.
 */
function lastAlive(startedAt: number | undefined, modifiedAt: Date | undefined): number | undefined {
  if (startedAt === undefined) return modifiedAt?.getTime();
  return Math.max(startedAt, modifiedAt?.getTime() ?? 0);
}

/**
 * Removes what interrupted writes left in a job's destination directory, beside a run (never
 * failing it; see docs/agent.md "Leftovers"):
 * - stores with rename (temporary files): walks the destination directory and removes the
 *   temporary names of earlier attempts of the same job (any age), and any temporary name not
 *   written for `STALE_PART_MS` (other jobs', older agents'). The current run's names carry its
 *   own attempt and are never touched.
 * - object stores with multipart uploads: lists the open uploads below the destination before
 *   the first write (`EarlierUploads`): every one of them predates this run. Those older than
 *   `STALE_UPLOAD_MS` are aborted at once; the others are aborted when this run reaches their key
 *   (writes or skips that file: a key of this job), so an upload of another job writing elsewhere
 *   below the same directory at the same time is left alone.
 */
export async function sweepTemporaries(destination: Connector, root: string, run: RunRef | undefined, signal: AbortSignal, log?: Logger): Promise<number> {
  if (!destination.capabilities.rename) return 0;
  const own = run ? runTag(run).slice(0, 11) : null;
  let removed = 0;
  try {
    const top = await destination.stat(root, { signal });
    if (top?.kind !== 'directory') return 0;
    for await (const entry of destination.list(root, { recursive: true, signal })) {
      if (entry.kind !== 'file') continue;
      const temp = parseTempName(baseName(entry.path));
      if (!temp) continue;
      const earlierOfJob = own !== null && temp.job === own && temp.attempt !== null && temp.attempt < run!.attempt;
      const alive = lastAlive(temp.startedAt, entry.modifiedAt);
      const stale = alive !== undefined && Date.now() - alive > STALE_PART_MS && !(own !== null && temp.job === own && temp.attempt === run!.attempt);
      if (!earlierOfJob && !stale) continue;
      await destination.remove(entry.path, { signal });
      removed++;
    }
  } catch (err) {
    if (!signal.aborted) log?.warn({ err: reasonOf(err), removed }, 'could not clean the destination of temporary files left by earlier runs');
  }
  if (removed > 0) log?.info({ removed }, 'removed temporary files left by earlier runs');
  return removed;
}

/** The open uploads below the destination when a run started, by object path (see sweepTemporaries). */
export class EarlierUploads {
  private readonly byPath = new Map<string, OpenUpload[]>();

  private constructor(private readonly destination: Connector, private readonly log?: Logger) {}

  /** Lists them (one request for most destinations) and aborts the abandoned ones. Never throws. */
  static async find(destination: Connector, root: string, signal: AbortSignal, log?: Logger): Promise<EarlierUploads> {
    const found = new EarlierUploads(destination, log);
    if (!destination.openUploads || !destination.abortUpload) return found;
    let count = 0;
    try {
      for await (const upload of destination.openUploads(root, { signal })) {
        if (upload.startedAt && Date.now() - upload.startedAt.getTime() > STALE_UPLOAD_MS) {
          await found.abort([upload]);
          continue;
        }
        if (++count > MAX_EARLIER_UPLOADS) break;
        const list = found.byPath.get(upload.path) ?? [];
        list.push(upload);
        found.byPath.set(upload.path, list);
      }
    } catch (err) {
      if (!signal.aborted) log?.warn({ err: reasonOf(err) }, 'could not list the open uploads left by earlier runs');
    }
    return found;
  }

  /** This run reached `path`: the uploads an earlier run left open for it go. */
  async reached(path: string): Promise<void> {
    const uploads = this.byPath.get(path);
    if (!uploads) return;
    this.byPath.delete(path);
    await this.abort(uploads);
  }

  private async abort(uploads: OpenUpload[]): Promise<void> {
    for (const upload of uploads) {
      // No signal: like the engine's own clean-up, it also runs after a cancel.
      await this.destination.abortUpload!(upload).then(
        () => this.log?.info({ file: upload.path }, 'aborted a multipart upload left open by an earlier run'),
        (err: unknown) => this.log?.warn({ file: upload.path, err: reasonOf(err) }, 'could not abort a multipart upload left open by an earlier run'),
      );
    }
  }
}
