import { Types } from 'mongoose';
import type { PayloadOf, AgentToServer } from '@xfer/shared';
import { isDuplicateKey, onlyDuplicateKeys } from '../../../lib/duplicate-key.js';
import type { Models } from '../../../models/index.js';
import type { StoredTransfer } from '../transfers/index.js';

type SentFiles = PayloadOf<typeof AgentToServer, 'relay.sent'>['files'];

/**
 * Each side of a relay vouches only for itself (docs/security.md "Relays"). The destination agent
 * says what it verified at the destination; only the source agent can say what it read at the
 * source. So a source file of a relayed attempt is moved or deleted (workflows/settle-step.ts)
 * only when the destination's verified result (path, size, SHA-256) matches what the source
 * agent reported for it (`relay.sent`, recorded here). Runs that were never relayed are left
 * as they are: their one agent read and wrote both sides.
 */

/**
 * Marks `attempt` of the job as relayed, before its source side starts (no source bytes flow
 * unmarked): an insert into `relayed_attempts` (models/relayed-attempt.model.ts says why not a
 * field of the transfer). Marking twice is the same mark.
 */
export async function markRelayed(db: Models, accountId: Types.ObjectId, jobId: string, attempt: number): Promise<void> {
  try {
    await db.relayedAttempts.create({ _id: `${jobId}:${attempt}`, account_id: accountId, job_id: new Types.ObjectId(jobId), attempt });
  } catch (err) {
    if (!isDuplicateKey(err)) throw err;
  }
}

/** The attempts of the job that ran as a relay. */
async function relayedAttemptsOf(db: Models, jobId: Types.ObjectId): Promise<Set<number>> {
  return new Set((await db.relayedAttempts.find({ job_id: jobId }, { _id: 0, attempt: 1 }).lean()).map((d) => d.attempt));
}

/**
 * Records a `relay.sent` of the source side: one document per (job, attempt, path). A batch sent
 * twice meets the unique index and is skipped, as the destination's file results are
 * (transfers/transfer-reports.ts); the first record of a path stands.
 */
export async function recordSent(db: Models, accountId: Types.ObjectId, jobId: string, attempt: number, files: SentFiles): Promise<void> {
  const now = new Date();
  const job = new Types.ObjectId(jobId);
  const docs = files.map((f) => ({ account_id: accountId, job_id: job, attempt, path: f.path, size: f.size, sha256: f.sha256, created_at: now }));
  try {
    await db.relaySentFiles.insertMany(docs, { ordered: false, lean: true });
  } catch (err) {
    if (!onlyDuplicateKeys(err)) throw err;
  }
}

/** A verified file result of the transfer's last attempt, as settle-step.ts reads it. */
export interface VerifiedResult {
  path: string;
  status: string;
  size: number;
  sha256?: string | null;
  verified_by?: string | null;
}

/** The attempt whose copy a result stands on: its own for `copied`, the one it names (`attempt N`) for a verified skip. */
function verifyingAttempt(transfer: StoredTransfer, doc: VerifiedResult): number | null {
  if (doc.status === 'copied') return transfer.attempt;
  const named = /^attempt ([1-9][0-9]{0,8})$/.exec(doc.verified_by ?? '');
  return named ? Number(named[1]) : null;
}

/**
 * Of `docs` (verified results of the transfer's last attempt, at most one settle batch), those
 * that may not be moved or deleted, with why. For a relayed attempt: the source agent must have
 * vouched for the path with the same size and SHA-256. For a verified skip claimed by a relayed
 * attempt's destination: the attempt it names must have recorded the file `copied` with that size
 * and SHA-256 (and that attempt's own source, when it was relayed, must have vouched for it).
 */
export async function unvouched(db: Models, transfer: StoredTransfer, docs: VerifiedResult[]): Promise<Map<string, string>> {
  const refused = new Map<string, string>();
  if (docs.length === 0) return refused;
  const relayed = await relayedAttemptsOf(db, transfer._id);
  if (relayed.size === 0) return refused;
  const key = (attempt: number, path: string) => `${attempt}\0${path}`;
  const paths = [...new Set(docs.map((d) => d.path))];
  const wanted = docs.map((d) => ({ doc: d, attempt: verifyingAttempt(transfer, d) }));
  const attempts = [...new Set(wanted.map((w) => w.attempt).filter((a): a is number => a !== null))];
  const earlier = attempts.filter((a) => a !== transfer.attempt);
  const [sent, copied] = await Promise.all([
    db.relaySentFiles.find({ job_id: transfer._id, attempt: { $in: attempts.filter((a) => relayed.has(a)) }, path: { $in: paths } }, { _id: 0, attempt: 1, path: 1, size: 1, sha256: 1 }).lean(),
    relayed.has(transfer.attempt) && earlier.length > 0
      ? db.transferFiles.find({ job_id: transfer._id, attempt: { $in: earlier }, path: { $in: paths }, status: 'copied' }, { _id: 0, attempt: 1, path: 1, size: 1, sha256: 1 }).lean()
      : Promise.resolve([]),
  ]);
  const sentBy = new Map(sent.map((s) => [key(s.attempt, s.path), s]));
  const copiedBy = new Map(copied.map((c) => [key(c.attempt, c.path), c]));
  const same = (a: { size: number; sha256?: string | null }, b: { size: number; sha256?: string | null }) => a.size === b.size && !!a.sha256 && a.sha256 === b.sha256;
  for (const { doc, attempt } of wanted) {
    if (attempt === null) {
      refused.set(doc.path, `its verification names no attempt ("${doc.verified_by ?? ''}")`);
      continue;
    }
    if (attempt !== transfer.attempt && relayed.has(transfer.attempt)) {
      const record = copiedBy.get(key(attempt, doc.path));
      if (!record || !same(record, doc)) {
        refused.set(doc.path, `the relay's destination agent said attempt ${attempt} verified it, which that attempt did not record`);
        continue;
      }
    }
    if (!relayed.has(attempt)) continue;
    const vouched = sentBy.get(key(attempt, doc.path));
    if (!vouched) refused.set(doc.path, `the relay's source agent never sent it (attempt ${attempt}): the destination's result alone does not move or delete a source file`);
    else if (!same(vouched, doc)) refused.set(doc.path, `its size or SHA-256 at the destination differs from what the relay's source agent read (attempt ${attempt})`);
  }
  return refused;
}
