import type { OverwritePolicy } from '@xfer/shared';
import type { Entry } from '../connectors/types.js';

export type FilePlan = { action: 'copy' } | { action: 'skip'; reason: string } | { action: 'fail'; reason: string };

/**
 * What to do with one source file given what is at its destination.
 *
 * - `resume` (a retry run): a destination file with the source's size is skipped whatever the
 *   policy. Sound because final names only ever hold complete, verified files (temporary name +
 *   rename, or an atomic object commit).
 * - `always`: copy.
 * - `never`: skip when anything is there.
 * - `if_changed`: skip when both sides report a checksum of the same algorithm and they match;
 *   else skip when the sizes match and the destination is not older than the source. Unknown
 *   times count as changed (copy).
 */
export function planFile(source: Entry, existing: Entry | null, policy: OverwritePolicy, resume: boolean): FilePlan {
  if (existing?.kind === 'directory') return { action: 'fail', reason: 'a directory exists at the destination path' };
  if (!existing) return { action: 'copy' };
  if (resume && existing.size === source.size) return { action: 'skip', reason: 'verified by an earlier run' };
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
