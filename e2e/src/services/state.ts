import { existsSync, readFileSync } from 'node:fs';
import { mkdir, open, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { isAlive } from '@xfer/control-plane/process';
import type { ServiceRecord } from './types.js';

/** `.xfer/services.json`: the running services of this checkout. */
export interface ServicesState {
  services: Record<string, ServiceRecord>;
}

/** The repository root: the nearest directory above `from` whose package.json declares workspaces. */
export function findRepoRoot(from: string): string {
  for (let dir = from; ; dir = dirname(dir)) {
    const manifest = join(dir, 'package.json');
    if (existsSync(manifest) && 'workspaces' in (JSON.parse(readFileSync(manifest, 'utf8')) as object)) return dir;
    if (dirname(dir) === dir) throw new Error(`no package.json with "workspaces" above ${from}`);
  }
}

const stateDir = (root: string) => join(root, '.xfer');

export async function readState(root: string): Promise<ServicesState> {
  try {
    return JSON.parse(await readFile(join(stateDir(root), 'services.json'), 'utf8')) as ServicesState;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { services: {} };
    throw err;
  }
}

/**
 * Writes services.json and services.env (KEY='value' of every running service, quoted for the
 * shell: `set -a; . .xfer/services.env` keeps a value with `;` whole, e.g. a blob connection
 * string) atomically.
 */
export async function writeState(root: string, state: ServicesState): Promise<void> {
  await mkdir(stateDir(root), { recursive: true });
  const names = Object.keys(state.services).sort();
  const lines = names.flatMap((n) => Object.entries(state.services[n].env).map(([k, v]) => `${k}=${shellQuoted(v)}`));
  await writeAtomically(join(stateDir(root), 'services.json'), JSON.stringify(state, null, 2) + '\n');
  await writeAtomically(join(stateDir(root), 'services.env'), lines.map((l) => l + '\n').join(''));
}

function shellQuoted(value: string): string {
  return `'${value.replace(/'/g, `'\\''`)}'`;
}

async function writeAtomically(path: string, text: string): Promise<void> {
  await writeFile(`${path}.${process.pid}.tmp`, text);
  await rename(`${path}.${process.pid}.tmp`, path);
}

/**
 * Runs `fn` holding `.xfer/services.lock`, so concurrent runs (two jest runs, a developer's
 * `services up`) never start the same service twice or lose each other's records. A lock whose
 * owner died is taken over. Waits up to `timeoutMs`: a first start may build a server for minutes.
 */
export async function withStateLock<T>(root: string, fn: () => Promise<T>, timeoutMs = 15 * 60_000): Promise<T> {
  await mkdir(stateDir(root), { recursive: true });
  const lock = join(stateDir(root), 'services.lock');
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      const handle = await open(lock, 'wx');
      await handle.writeFile(String(process.pid));
      await handle.close();
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    if (await lockIsStale(lock)) await rm(lock, { force: true });
    else if (Date.now() > deadline) throw new Error(`${lock} is held by another process; gave up after ${timeoutMs} ms`);
    else await sleep(200);
  }
  try {
    return await fn();
  } finally {
    await rm(lock, { force: true });
  }
}

async function lockIsStale(lock: string): Promise<boolean> {
  try {
    const owner = Number(await readFile(lock, 'utf8'));
    // An empty file is a lock being written right now, unless it has stayed empty for a while.
    if (!owner) return Date.now() - (await stat(lock)).mtimeMs > 5000;
    return !isAlive(owner);
  } catch {
    return false;
  }
}
