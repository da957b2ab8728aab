import type { Entry } from '../connectors/types.js';
import { planFile } from './plan.js';

const at = (iso: string) => new Date(iso);
const file = (size: number, modified?: string, checksum?: Entry['checksum']): Entry => ({
  path: 'f', kind: 'file', size, modifiedAt: modified ? at(modified) : undefined, checksum,
});

describe('planFile', () => {
  const src = file(10, '2024-01-02T00:00:00Z');

  test('nothing at the destination: copy, whatever the policy', () => {
    for (const policy of ['always', 'if_changed', 'never'] as const) expect(planFile(src, null, policy, false).action).toBe('copy');
  });

  test('a directory in the way fails the file', () => {
    expect(planFile(src, { path: 'f', kind: 'directory', size: 0 }, 'always', false)).toEqual({ action: 'fail', reason: 'a directory exists at the destination path' });
  });

  test('always copies and never skips an existing file', () => {
    expect(planFile(src, file(10, '2025-01-01T00:00:00Z'), 'always', false).action).toBe('copy');
    expect(planFile(src, file(3, '2020-01-01T00:00:00Z'), 'never', false).action).toBe('skip');
  });

  test('if_changed: same size and not older skips; older, other size or unknown times copy', () => {
    expect(planFile(src, file(10, '2024-01-02T00:00:00Z'), 'if_changed', false).action).toBe('skip');
    expect(planFile(src, file(10, '2024-01-01T00:00:00Z'), 'if_changed', false).action).toBe('copy');
    expect(planFile(src, file(11, '2025-01-01T00:00:00Z'), 'if_changed', false).action).toBe('copy');
    expect(planFile(src, file(10), 'if_changed', false).action).toBe('copy');
  });

  test('if_changed: checksums of one algorithm decide over size and time; of different algorithms they do not', () => {
    const a = file(10, '2024-01-02T00:00:00Z', { algorithm: 'md5', value: 'aa' });
    expect(planFile(a, file(10, '2020-01-01T00:00:00Z', { algorithm: 'md5', value: 'aa' }), 'if_changed', false).action).toBe('skip');
    expect(planFile(a, file(10, '2030-01-01T00:00:00Z', { algorithm: 'md5', value: 'bb' }), 'if_changed', false).action).toBe('copy');
    expect(planFile(a, file(10, '2030-01-01T00:00:00Z', { algorithm: 'sha256', value: 'cc' }), 'if_changed', false).action).toBe('skip');
  });

  test('resume skips a destination file of the source size even under always, and copies one of another size', () => {
    expect(planFile(src, file(10, '2000-01-01T00:00:00Z'), 'always', true).action).toBe('skip');
    expect(planFile(src, file(9, '2030-01-01T00:00:00Z'), 'never', true).action).toBe('skip'); // never still never overwrites
    expect(planFile(src, file(9, '2030-01-01T00:00:00Z'), 'always', true).action).toBe('copy');
  });
});
