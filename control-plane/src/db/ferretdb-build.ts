import { spawn } from 'node:child_process';
import { access, chmod, constants, cp, mkdir, mkdtemp, readdir, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { findExecutable, type ChildEnv } from './process.js';

/** The FerretDB release the embedded database and the tests run (its SQLite backend). */
export const FERRETDB_VERSION = 'v1.24.2';
const FERRETDB_MODULE = 'github.com/FerretDB/FerretDB';

export interface EnsureFerretdbOptions {
  /** The binary lives at `<cacheDir>/bin/ferretdb`. */
  cacheDir: string;
  log: (msg: string) => void;
  /** Environment for `go` (PATH, HOME, GOPROXY…); inherited when omitted. */
  env?: ChildEnv;
}

/** Path of the cached FerretDB binary under `cacheDir`, built there by {@link ensureFerretdbBinary}. */
export function cachedFerretdbPath(cacheDir: string): string {
  return join(cacheDir, 'bin', 'ferretdb');
}

/**
 * Returns the path of `<cacheDir>/bin/ferretdb`, building FerretDB from source with Go first when
 * it is missing. `go install …@version` cannot be used: it reads the module's version list, which
 * the proxy refuses for this module, so the source is fetched with `go mod download` and built.
 * Throws when the binary is missing and `go` is not on PATH.
 */
export async function ensureFerretdbBinary(opts: EnsureFerretdbOptions): Promise<string> {
  const target = cachedFerretdbPath(opts.cacheDir);
  if (await isExecutable(target)) return target;
  const go = findExecutable('go', opts.env);
  if (!go) throw new Error(`FerretDB is not built (${target}) and Go is not on PATH to build it`);

  opts.log(`Building FerretDB ${FERRETDB_VERSION.slice(1)} once into ${join(opts.cacheDir, 'bin')} (about 2 minutes)…`);
  await mkdir(join(opts.cacheDir, 'bin'), { recursive: true });
  const work = await mkdtemp(join(tmpdir(), 'xfer-ferretdb-build-'));
  try {
    const info = JSON.parse(await run(go, ['mod', 'download', '-json', `${FERRETDB_MODULE}@${FERRETDB_VERSION}`], work, opts.env)) as { Dir?: string; Error?: string };
    if (!info.Dir) throw new Error(`go mod download gave no source directory${info.Error ? `: ${info.Error}` : ''}`);
    // The module cache is read-only; the build needs to write version.txt into the tree.
    const src = join(work, 'src');
    await cp(info.Dir, src, { recursive: true });
    await makeWritable(src);
    // Release builds embed the version from this file; without it the binary panics at start.
    await writeFile(join(src, 'build', 'version', 'version.txt'), FERRETDB_VERSION);
    // Build beside the target and rename, so an interrupted build never leaves a broken binary.
    const partial = `${target}.${process.pid}.partial`;
    await run(go, ['build', '-trimpath', '-buildvcs=false', '-o', partial, './cmd/ferretdb'], src, opts.env);
    await rename(partial, target);
  } finally {
    await rm(work, { recursive: true, force: true });
  }
  opts.log(`FerretDB built: ${target}`);
  return target;
}

async function isExecutable(path: string): Promise<boolean> {
  try {
    await access(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

async function makeWritable(dir: string): Promise<void> {
  await chmod(dir, 0o755);
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) await makeWritable(path);
    else if (entry.isFile()) await chmod(path, 0o644);
  }
}

/** Runs a command to completion and returns its stdout; the error carries the tail of stderr. */
function run(cmd: string, args: string[], cwd: string, env: ChildEnv): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd, env: env as NodeJS.ProcessEnv, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr = (stderr + chunk).slice(-4000)));
    child.once('error', reject);
    child.once('close', (code) => {
      if (code === 0) resolve(stdout);
      else reject(new Error(`${cmd} ${args.join(' ')} failed (exit ${code}):\n${stderr.trim()}`));
    });
  });
}
