import { access, constants, mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Env } from '../services/types.js';
import { runCommand } from './run-command.js';

/**
 * Schemathesis (PyPI), the API fuzzer CI runs against a real server with the OpenAPI document
 * (e2e/test/openapi-fuzz.e2e.test.ts). Pinned, installed once into a virtualenv of its own under
 * the shared cache by `npm run services -- install` (or by the first test that needs it).
 * The venv is made `--without-pip` and filled by the system's pip (`pip --python`): Debian's
 * python3 has no ensurepip without python3-venv, and installing into a venv never touches the
 * externally managed system environment.
 */
export const SCHEMATHESIS_VERSION = '4.32.5';

/** The venv's directory; it is complete only once its marker file exists. */
export function schemathesisVenv(cacheDir: string): string {
  return join(cacheDir, `schemathesis-${SCHEMATHESIS_VERSION}`);
}

/** Path of the cached `st` executable, installed first when missing. */
export async function ensureSchemathesis(opts: { cacheDir: string; env: Env; log: (msg: string) => void }): Promise<string> {
  const venv = schemathesisVenv(opts.cacheDir);
  const st = join(venv, 'bin', 'st');
  const marker = join(venv, '.installed');
  try {
    await access(marker, constants.R_OK);
    await access(st, constants.X_OK);
    return st;
  } catch {
    // not installed yet, or an install was cut off: start over
  }
  opts.log(`installing schemathesis ${SCHEMATHESIS_VERSION} (PyPI) into ${venv}`);
  await rm(venv, { recursive: true, force: true });
  await mkdir(opts.cacheDir, { recursive: true });
  const python = opts.env.PYTHON || 'python3';
  try {
    await runCommand(python, ['-m', 'venv', '--without-pip', venv], opts.cacheDir, opts.env);
    await runCommand(python, ['-m', 'pip', '--python', join(venv, 'bin', 'python'), 'install', '--quiet', '--disable-pip-version-check',
      `schemathesis==${SCHEMATHESIS_VERSION}`], opts.cacheDir, opts.env);
    await access(st, constants.X_OK);
    await writeFile(marker, `${SCHEMATHESIS_VERSION}\n`);
  } catch (err) {
    await rm(venv, { recursive: true, force: true });
    throw err;
  }
  return st;
}
