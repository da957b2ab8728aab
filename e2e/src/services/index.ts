import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { defaultCacheDir } from '@xfer/control-plane';
import { commandLine, isAlive, stopPid } from '@xfer/control-plane/process';
import { serviceDefinition } from './registry.js';
import { findRepoRoot, readState, withStateLock, writeState, type ServicesState } from './state.js';
import type { Env, ServiceContext, ServiceDefinition, ServiceRecord } from './types.js';

export { SERVICES, serviceDefinition } from './registry.js';
export { findRepoRoot } from './state.js';
export type * from './types.js';

export interface ServicesOptions {
  /** The caller's environment (pass `process.env`): PATH, HOME, and settings of external servers. */
  env: Env;
  log?: (msg: string) => void;
  /** The checkout whose `.xfer/` records the services; found from this file's location by default. */
  rootDir?: string;
}

export interface EnsureOptions extends ServicesOptions {
  /** Keep the services running until `services down` (the CLI's `up`), instead of until released. */
  pin?: boolean;
}

export interface ServiceStatus {
  name: string;
  record: ServiceRecord;
  healthy: boolean;
}

const rootOf = (opts: ServicesOptions) => opts.rootDir ?? findRepoRoot(dirname(fileURLToPath(import.meta.url)));
const logOf = (opts: ServicesOptions) => opts.log ?? ((msg: string) => process.stderr.write(`services: ${msg}\n`));

/**
 * Makes the named services run and registers the calling process as a user of each: a healthy
 * recorded server is reused, a dead or unhealthy one is replaced, and a service whose settings are
 * all set in `opts.env` (e.g. MONGODB_URI) is taken as external and not started.
 * Returns the settings of all named services and the names started by this call.
 */
export async function ensureServices(names: string[], opts: EnsureOptions): Promise<{ env: Record<string, string>; started: string[] }> {
  const defs = names.map(serviceDefinition);
  const root = rootOf(opts);
  const log = logOf(opts);
  return withStateLock(root, async () => {
    const state = await readState(root);
    const env: Record<string, string> = {};
    const started: string[] = [];
    try {
      for (const def of defs) {
        if (def.provides.length > 0 && def.provides.every((key) => opts.env[key])) {
          for (const key of def.provides) env[key] = opts.env[key]!;
          log(`${def.name}: using ${def.provides.join(', ')} from the environment`);
          continue;
        }
        const { record, fresh } = await runningRecord(def, state, opts, log);
        if (fresh) started.push(def.name);
        record.users = [...record.users.filter((pid) => pid !== process.pid && isAlive(pid)), ...(opts.pin ? [] : [process.pid])];
        record.pinned ||= opts.pin ?? false;
        Object.assign(env, record.env);
      }
    } finally {
      // Also when a later service fails: what did start stays recorded, so `down` can stop it.
      await writeState(root, state);
    }
    return { env, started };
  });
}

/** The healthy recorded server of `def`, else a newly started one; either way recorded in `state`. */
async function runningRecord(def: ServiceDefinition, state: ServicesState, opts: ServicesOptions, log: (msg: string) => void) {
  const recorded = state.services[def.name];
  if (recorded && (await isHealthy(def, recorded))) {
    log(`${def.name}: reusing the running server (pid ${recorded.pid})`);
    return { record: recorded, fresh: false };
  }
  if (recorded) {
    log(`${def.name}: recorded server (pid ${recorded.pid}) does not answer; replacing it`);
    await stopRecord(def, recorded);
    delete state.services[def.name];
  }
  const record = await startService(def, opts, log);
  state.services[def.name] = record;
  return { record, fresh: true };
}

/**
 * The calling process stops using the named services; an unpinned service nobody else uses
 * (e.g. one a jest run started) is stopped. This is what test teardown calls.
 */
export async function releaseServices(names: string[], opts: ServicesOptions): Promise<void> {
  await updateRecords(names, opts, async (def, record, state) => {
    record.users = record.users.filter((pid) => pid !== process.pid && isAlive(pid));
    if (record.pinned || record.users.length > 0) return;
    await stopRecord(def, record);
    delete state.services[def.name];
  });
}

/** Stops the named services (all recorded ones when `names` is empty), whoever uses them. */
export async function stopServices(names: string[], opts: ServicesOptions): Promise<string[]> {
  const stopped: string[] = [];
  await updateRecords(names, opts, async (def, record, state) => {
    await stopRecord(def, record);
    delete state.services[def.name];
    stopped.push(def.name);
  });
  return stopped;
}

/** The recorded services and whether each answers now. */
export async function serviceStatus(opts: ServicesOptions): Promise<ServiceStatus[]> {
  const state = await readState(rootOf(opts));
  return Promise.all(
    Object.values(state.services).map(async (record) => ({
      name: record.name,
      record,
      healthy: await isHealthy(serviceDefinition(record.name), record),
    })),
  );
}

/** Installs or builds what the named services need, without leaving anything running. */
export async function installServices(names: string[], opts: ServicesOptions): Promise<void> {
  for (const def of names.map(serviceDefinition)) {
    if (!def.install) continue;
    const ctx = await context(def, opts, logOf(opts));
    try {
      await def.install(ctx);
    } finally {
      await rm(ctx.dataDir, { recursive: true, force: true });
    }
  }
}

async function updateRecords(
  names: string[],
  opts: ServicesOptions,
  fn: (def: ServiceDefinition, record: ServiceRecord, state: ServicesState) => Promise<void>,
): Promise<void> {
  const root = rootOf(opts);
  await withStateLock(root, async () => {
    const state = await readState(root);
    const targets = names.length > 0 ? names : Object.keys(state.services);
    for (const name of targets) {
      const record = state.services[name];
      if (record) await fn(serviceDefinition(name), record, state);
    }
    await writeState(root, state);
  });
}

async function context(def: ServiceDefinition, opts: ServicesOptions, log: (msg: string) => void): Promise<ServiceContext> {
  const dataDir = await mkdtemp(join(tmpdir(), `xfer-${def.name}-`));
  return { dataDir, cacheDir: defaultCacheDir(opts.env), env: opts.env, log };
}

async function startService(def: ServiceDefinition, opts: ServicesOptions, log: (msg: string) => void): Promise<ServiceRecord> {
  const ctx = await context(def, opts, log);
  try {
    const started = await def.start(ctx);
    log(`${def.name}: started (pid ${started.pid}) ${Object.entries(started.env).map(([k, v]) => `${k}=${v}`).join(' ')}`);
    return { ...started, name: def.name, dataDir: ctx.dataDir, startedAt: new Date().toISOString(), pinned: false, users: [] };
  } catch (err) {
    await rm(ctx.dataDir, { recursive: true, force: true });
    throw err;
  }
}

/** True when the recorded pid is still our server: a recycled pid (e.g. after a reboot) does not name its dataDir. */
async function ownsPid(record: ServiceRecord): Promise<boolean> {
  return isAlive(record.pid) && (await commandLine(record.pid)).includes(record.dataDir);
}

async function isHealthy(def: ServiceDefinition, record: ServiceRecord): Promise<boolean> {
  return (await ownsPid(record)) && (await def.isHealthy(record));
}

async function stopRecord(def: ServiceDefinition, record: ServiceRecord): Promise<void> {
  if (def.stop) await def.stop(record);
  else if (await ownsPid(record)) await stopPid(record.pid, 5000);
  await rm(record.dataDir, { recursive: true, force: true });
}
