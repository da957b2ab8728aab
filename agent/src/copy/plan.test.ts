import type { OverwritePolicy, VerifiedFile } from '@xfer/shared';
import type { Entry } from '../connectors/types.js';
import { planFile, type FilePlan } from './plan.js';

const at = (iso: string) => new Date(iso);
const file = (size: number, modified?: string, checksum?: Entry['checksum']): Entry => ({
  path: 'f', kind: 'file', size, modifiedAt: modified ? at(modified) : undefined, checksum,
});

describe('planFile', () => {
  const src = file(10, '2024-01-02T00:00:00Z');

  test('nothing at the destination: copy, whatever the policy', () => {
    for (const policy of ['always', 'if_changed', 'never'] as const) expect(planFile(src, null, policy).action).toBe('copy');
  });

  test('a directory in the way fails the file', () => {
    expect(planFile(src, { path: 'f', kind: 'directory', size: 0 }, 'always')).toEqual({ action: 'fail', reason: 'a directory exists at the destination path' });
  });

  test('always copies and never skips an existing file', () => {
    expect(planFile(src, file(10, '2025-01-01T00:00:00Z'), 'always').action).toBe('copy');
    expect(planFile(src, file(3, '2020-01-01T00:00:00Z'), 'never').action).toBe('skip');
  });

  test('if_changed: same size and not older skips; older, other size or unknown times copy', () => {
    expect(planFile(src, file(10, '2024-01-02T00:00:00Z'), 'if_changed').action).toBe('skip');
    expect(planFile(src, file(10, '2024-01-01T00:00:00Z'), 'if_changed').action).toBe('copy');
    expect(planFile(src, file(11, '2025-01-01T00:00:00Z'), 'if_changed').action).toBe('copy');
    expect(planFile(src, file(10), 'if_changed').action).toBe('copy');
  });

  test('if_changed: checksums of one algorithm decide over size and time; of different algorithms they do not', () => {
    const a = file(10, '2024-01-02T00:00:00Z', { algorithm: 'md5', value: 'aa' });
    expect(planFile(a, file(10, '2020-01-01T00:00:00Z', { algorithm: 'md5', value: 'aa' }), 'if_changed').action).toBe('skip');
    expect(planFile(a, file(10, '2030-01-01T00:00:00Z', { algorithm: 'md5', value: 'bb' }), 'if_changed').action).toBe('copy');
    expect(planFile(a, file(10, '2030-01-01T00:00:00Z', { algorithm: 'sha256', value: 'cc' }), 'if_changed').action).toBe('skip');
  });

  describe('with the result an earlier attempt stored (resume)', () => {
    const SHA = 'a'.repeat(64);
    const OTHER = 'b'.repeat(64);
    const verified = (size: number, attempt = 1, sha256?: string): VerifiedFile => ({ path: 'f', size, attempt, ...(sha256 ? { sha256 } : {}) });
    const sum = (value: string): Entry['checksum'] => ({ algorithm: 'sha256', value });
    type Row = [string, Entry, Entry | null, VerifiedFile | undefined, OverwritePolicy, FilePlan];
    const skipBy = (v: VerifiedFile): FilePlan => ({ action: 'skip', reason: `verified by attempt ${v.attempt}`, verifiedBy: v });
    const v10 = verified(10);
    const v10a3 = verified(10, 3, SHA);
    const rows: Row[] = [
      ['verified, destination of that size: skipped under always', src, file(10, '2000-01-01T00:00:00Z'), v10, 'always', skipBy(v10)],
      ['verified, destination of that size: skipped under if_changed even when older', src, file(10, '2000-01-01T00:00:00Z'), v10, 'if_changed', skipBy(v10)],
      ['verified, destination of that size: skipped under never', src, file(10), v10, 'never', skipBy(v10)],
      ['verified by attempt 3 with matching SHA-256 on both sides', file(10, undefined, sum(SHA)), file(10, undefined, sum(SHA)), v10a3, 'always', skipBy(v10a3)],
      ['verified, destination gone: copied', src, null, v10, 'never', { action: 'copy' }],
      ['verified, destination of another size (replaced since): the policy decides (always copies)', src, file(9), v10, 'always', { action: 'copy' }],
      ['verified, destination of another size: the policy decides (never skips)', src, file(9), v10, 'never', { action: 'skip', reason: 'exists at the destination' }],
      ['verified with another size than the source (source changed since): always copies', file(11), file(10), v10, 'always', { action: 'copy' }],
      ['verified with another size than the source: if_changed copies', file(11, '2024-01-02T00:00:00Z'), file(10, '2030-01-01T00:00:00Z'), v10, 'if_changed', { action: 'copy' }],
      ['verified, the source reports another SHA-256: always copies', file(10, undefined, sum(OTHER)), file(10), v10a3, 'always', { action: 'copy' }],
      ['verified, the destination reports another SHA-256: always copies', src, file(10, undefined, sum(OTHER)), v10a3, 'always', { action: 'copy' }],
      ['nothing verified, stale file of the source size: always copies', src, file(10, '2030-01-01T00:00:00Z'), undefined, 'always', { action: 'copy' }],
      ['nothing verified, stale file of the source size: if_changed keeps a newer one', src, file(10, '2030-01-01T00:00:00Z'), undefined, 'if_changed', { action: 'skip', reason: 'same size, destination not older' }],
      ['nothing verified, stale file of the source size: if_changed copies an older one', src, file(10, '2000-01-01T00:00:00Z'), undefined, 'if_changed', { action: 'copy' }],
      ['verified, a directory in the way: fails', src, { path: 'f', kind: 'directory', size: 0 }, v10, 'never', { action: 'fail', reason: 'a directory exists at the destination path' }],
    ];
    test.each(rows)('%s', (_name, source, existing, earlier, policy, expected) => {
      expect(planFile(source, existing, policy, earlier)).toEqual(expected);
    });
  });
});
