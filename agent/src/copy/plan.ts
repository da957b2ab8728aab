import type { OverwritePolicy, VerifiedFile } from '@xfer/shared';
import type { Entry } from '../connectors/types.js';

/** What the write side does with one file; a skip of a file an earlier attempt verified carries that attempt's record. */
export type FilePlan =
  | { action: 'copy' }
  | { action: 'skip'; reason: string; verifiedBy?: VerifiedFile }
  | { action: 'fail'; reason: string };

/**
 * What to do with one source file given what is at its destination and, on a resume run, what an
 * earlier attempt recorded for it (`earlier`: copied and verified, from the control plane).
 *
 * - A file an earlier attempt verified is skipped ("verified by attempt N") when the record
 *   matches the source (same size; same SHA-256 when the source reports one) and the destination
 *   holds it now under its final name with that size (and that SHA-256 when the store reports
 *   one). Sound because final names only ever hold complete, verified files (temporary name +
 *   rename, or an atomic object commit). Anything else falls to the policy, whatever its size:
 *   a same-size file no attempt wrote is not trusted.
 * - `always`: copy.
 * - `never`: skip when anything is there.
 * - `if_changed`: skip when both sides report a checksum of the same algorithm and they match;
 *   else skip when the sizes match and the destination is not older than the source. Unknown
 *   times count as changed (copy).
 */
export function planFile(source: Entry, existing: Entry | null, policy: OverwritePolicy, earlier?: VerifiedFile): FilePlan {
  if (existing?.kind === 'directory') return { action: 'fail', reason: 'a directory exists at the destination path' };
  if (!existing) return { action: 'copy' };
  if (earlier && stillVerified(source, existing, earlier)) return { action: 'skip', reason: `verified by attempt ${earlier.attempt}`, verifiedBy: earlier };
  switch (policy) {
    case 'always':
      return { action: 'copy' };
    case 'never':
      return { action: 'skip', reason: 'exists at the destination' };
    case 'if_changed': {
      const a = source.checksum;
      const b = existing.checksum;
      if (a && b && a.algorithm === b.algorithm) {
        return a.value === b.value ? { action: 'skip', reason: `same ${a.algorithm}` } : { action: 'copy' };
      }
      if (existing.size !== source.size) return { action: 'copy' };
      if (source.modifiedAt && existing.modifiedAt && existing.modifiedAt.getTime() >= source.modifiedAt.getTime()) {
        return { action: 'skip', reason: 'same size, destination not older' };
      }
      return { action: 'copy' };
    }
  }
}

/** The earlier attempt's record still describes both the source file and what the destination holds. */
export function stillVerified(source: Entry, existing: Entry, earlier: VerifiedFile): boolean {
  if (earlier.size !== source.size || existing.size !== earlier.size) return false;
  for (const side of [source, existing]) {
    const sum = side.checksum;
    if (earlier.sha256 && sum?.algorithm === 'sha256' && sum.value.toLowerCase() !== earlier.sha256) return false;
  }
  return true;
}
