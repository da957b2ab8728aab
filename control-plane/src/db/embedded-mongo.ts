import { spawnSync } from 'node:child_process';
import { access, constants, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { cachedFerretdbPath, ensureFerretdbBinary, FERRETDB_VERSION } from './ferretdb-build.js';
import { commandLine, findExecutable, isAlive, startServerProcess, stopPid, type ChildEnv } from './process.js';

export interface EmbeddedMongoOptions {
  /** Database files, the server log (`server.log`) and the pidfile (`server.pid`) live here. */
  dataDir: string;
  /** Where FerretDB is cached or built (`<cacheDir>/bin/ferretdb`); see {@link defaultCacheDir}. */
  cacheDir: string;
  /** Use this FerretDB binary, even when `mongod` is on PATH. */
  ferretdbBin?: string;
  log: (msg: string) => void;
  /**
   * Let the server outlive this process (stop it by pid later). Otherwise it is stopped when this
   * process exits, even without `stop()` (but not on SIGKILL: the next start in `dataDir` stops it).
   */
  detached?: boolean;
  /** Environment for the server and for finding `mongod`/`go`/`ferretdb`; inherited when omitted. */
  env?: ChildEnv;
  /** Listen on this 127.0.0.1 port (e.g. to restart on the same one) instead of a free one. */
  port?: number;
  /** How long the server may take to accept connections (default 30 s). */
  startTimeoutMs?: number;
}

export interface EmbeddedMongo {
  /** `mongodb://127.0.0.1:PORT/`; callers choose the database name. */
  uri: string;
  kind: 'mongod' | 'ferretdb';
  pid: number;
  /** SIGTERM, then SIGKILL after 5 s; resolves when the server has exited. Idempotent. */
  stop(): Promise<void>;
}

interface PidFile {
  pid: number;
  kind: EmbeddedMongo['kind'];
  port: number;
}

interface Server {
  kind: EmbeddedMongo['kind'];
  bin: string;
  args: (port: number) => string[];
  /** Variables the server gets on top of the caller's environment. */
  env?: ChildEnv;
}

/** The cache directory for built tools: `$XFER_CACHE_DIR`, else `$HOME/.cache/xfer`. */
export function defaultCacheDir(env: Record<string, string | undefined>): string {
  return resolve(env.XFER_CACHE_DIR || join(env.HOME || homedir(), '.cache', 'xfer'));
}

/**
 * Starts a MongoDB-compatible server on a free 127.0.0.1 port with its data under `dataDir`:
 * `mongod` (≥ 6) when it is on PATH, else FerretDB with its SQLite backend (an explicit
 * `ferretdbBin`, else `ferretdb` on PATH, else the cached build, else built once with Go).
 * A server left running by a crashed previous owner of `dataDir` is stopped first, so one
 * `dataDir` serves one server at a time. Throws, naming what to install, when neither `mongod`
 * nor a way to get FerretDB exists, and with the tail of the server log when it fails to start.
 */
export async function startEmbeddedMongo(opts: EmbeddedMongoOptions): Promise<EmbeddedMongo> {
  const dataDir = resolve(opts.dataDir);
  await mkdir(dataDir, { recursive: true });
  await stopStaleServer(dataDir, opts.log);
  const server = await chooseServer({ ...opts, dataDir });
  const logPath = join(dataDir, 'server.log');
  const pidPath = join(dataDir, 'server.pid');

  // A port picked free can be taken before the server binds it: the helper retries on a fresh one.
  const { pid, port } = await startServerProcess({
    name: server.kind,
    bin: server.bin,
    args: server.args,
    logPath,
    env: server.env ? { ...(opts.env ?? process.env), ...server.env } : opts.env,
    port: opts.port,
    timeoutMs: opts.startTimeoutMs ?? 30_000,
    // Not detached, it stays in our process group, so a terminal's Ctrl-C stops it with us.
    detached: opts.detached ?? false,
    stampLog: true,
    onSpawn: (pid, port) => writeFile(pidPath, JSON.stringify({ pid, kind: server.kind, port } satisfies PidFile)),
  });
  // Without detached, the server is this process's helper: take it down if we exit without stop().
  const killOnExit = () => {
    try {
      process.kill(pid, 'SIGTERM');
    } catch {
      // already gone
    }
  };
  if (!opts.detached) process.once('exit', killOnExit);
  let stopped: Promise<void> | undefined;
  return {
    uri: `mongodb://127.0.0.1:${port}/`,
    kind: server.kind,
    pid,
    stop: () =>
      (stopped ??= (async () => {
        process.removeListener('exit', killOnExit);
        await stopPid(pid, 5000);
        const current = await readPidFile(pidPath);
        if (current?.pid === pid) await rm(pidPath, { force: true });
      })()),
  };
}

async function chooseServer(opts: EmbeddedMongoOptions & { dataDir: string }): Promise<Server> {
  if (!opts.ferretdbBin) {
    const mongod = findExecutable('mongod', opts.env);
    const major = mongod ? mongodMajorVersion(mongod, opts.env) : null;
    if (mongod && major !== null && major >= 6) {
      const dbPath = join(opts.dataDir, 'mongod');
      await mkdir(dbPath, { recursive: true });
      return { kind: 'mongod', bin: mongod, args: (port) => ['--dbpath', dbPath, '--bind_ip', '127.0.0.1', '--port', String(port)] };
    }
    if (mongod) opts.log(`ignoring ${mongod}: version ${major ?? 'unknown'} is older than MongoDB 6`);
  }
  const bin = opts.ferretdbBin ?? findExecutable('ferretdb', opts.env) ?? (await ferretdbFromCache(opts));
  const sqliteDir = join(opts.dataDir, 'sqlite');
  const stateDir = join(opts.dataDir, 'state');
  await mkdir(sqliteDir, { recursive: true });
  await mkdir(stateDir, { recursive: true });
  return {
    kind: 'ferretdb',
    bin,
    args: (port) => [
      '--handler=sqlite',
      // FerretDB wants a file: URL of a directory, with the trailing slash.
      `--sqlite-url=${pathToFileURL(sqliteDir).href}/`,
      `--listen-addr=127.0.0.1:${port}`,
      `--state-dir=${stateDir}`,
      // The debug HTTP listener defaults to a fixed port, which a second instance could not bind.
      '--debug-addr=-',
      '--telemetry=disable',
      '--log-level=warn',
    ],
    // FerretDB allocates heavily per command (documents decoded from SQLite's JSON), and its live
    // heap is small: Go's default GOGC=100 spends a third of its CPU collecting. At 400 the heap
    // may grow to 5x the live set (tens of MiB) and a findOne costs ~30% less CPU, which is what
    // bounds the API's authenticated throughput on the embedded database (bench/api-throughput.mjs,
    // docs/architecture.md). An operator's own GOGC wins.
    env: { GOGC: (opts.env ?? process.env).GOGC ?? '400' },
  };
}

async function ferretdbFromCache(opts: EmbeddedMongoOptions): Promise<string> {
  const cached = cachedFerretdbPath(opts.cacheDir);
  const usable = await access(cached, constants.X_OK).then(() => true, () => false);
  if (!usable && !findExecutable('go', opts.env)) {
    throw new Error(
      'No MongoDB server is available. Install one of:\n' +
        '  - MongoDB 6 or newer, with `mongod` on PATH;\n' +
        `  - Go 1.24 or newer, with \`go\` on PATH, so FerretDB ${FERRETDB_VERSION.slice(1)} can be built once into ${join(opts.cacheDir, 'bin')};\n` +
        '  - or set MONGODB_URI to an existing MongoDB server.',
    );
  }
  return ensureFerretdbBinary({ cacheDir: opts.cacheDir, log: opts.log, env: opts.env });
}

function mongodMajorVersion(mongod: string, env: ChildEnv): number | null {
  const out = spawnSync(mongod, ['--version'], { env: env as NodeJS.ProcessEnv, encoding: 'utf8', timeout: 10_000 }).stdout ?? '';
  const match = /db version v(\d+)\./.exec(out);
  return match ? Number(match[1]) : null;
}

async function readPidFile(path: string): Promise<PidFile | null> {
  try {
    return JSON.parse(await readFile(path, 'utf8')) as PidFile;
  } catch {
    return null;
  }
}

/**
 * Stops the server a previous owner of `dataDir` left running (e.g. after kill -9 of its parent).
 * The pid counts only if its command line names `dataDir`, so a recycled pid is never killed.
 */
async function stopStaleServer(dataDir: string, log: (msg: string) => void): Promise<void> {
  const pidPath = join(dataDir, 'server.pid');
  const stale = await readPidFile(pidPath);
  if (!stale) return;
  if (isAlive(stale.pid) && (await commandLine(stale.pid)).includes(dataDir)) {
    log(`stopping the ${stale.kind} server (pid ${stale.pid}) left running in ${dataDir}`);
    await stopPid(stale.pid, 5000);
  }
  await rm(pidPath, { force: true });
}
