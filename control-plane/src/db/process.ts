import { spawn, spawnSync } from 'node:child_process';
import { closeSync, openSync, readFileSync, writeSync } from 'node:fs';
import { open, readFile } from 'node:fs/promises';
import { createServer, connect } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

/** Environment handed to child processes; `undefined` lets them inherit this process's environment. */
export type ChildEnv = Record<string, string | undefined> | undefined;

/**
 * Absolute path of `name` on the PATH of `env` (the inherited environment when undefined), or null.
 * Asks the shell so that this module never reads `process.env` itself.
 */
export function findExecutable(name: string, env?: ChildEnv): string | null {
  const result = spawnSync('/bin/sh', ['-c', 'command -v "$1"', 'sh', name], { env: env as NodeJS.ProcessEnv, encoding: 'utf8' });
  const path = result.status === 0 ? result.stdout.trim() : '';
  return path.startsWith('/') ? path : null;
}

/** A TCP port on 127.0.0.1 that was free a moment ago (the OS picks it). */
export async function freeLoopbackPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (!address || typeof address === 'string') throw new Error('could not read the address of a free port');
  return address.port;
}

/** True when something accepts TCP connections on 127.0.0.1:`port` within `timeoutMs`. */
export function acceptsTcp(port: number, timeoutMs = 1000): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

/**
 * Waits until 127.0.0.1:`port` accepts TCP. Gives up after `timeoutMs`, or as soon as
 * `stillRunning()` answers false, so a server that dies at start fails fast.
 */
export async function waitForTcp(port: number, opts: { timeoutMs: number; stillRunning?: () => boolean }): Promise<void> {
  const deadline = Date.now() + opts.timeoutMs;
  for (;;) {
    if (await acceptsTcp(port, 500)) return;
    if (opts.stillRunning && !opts.stillRunning()) throw new Error(`the server exited before accepting connections on port ${port}`);
    if (Date.now() > deadline) throw new Error(`nothing accepted connections on 127.0.0.1:${port} within ${opts.timeoutMs} ms`);
    await sleep(100);
  }
}

/** True while `pid` runs. A zombie (exited, not yet reaped by its parent) counts as gone. */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
  try {
    // /proc/PID/stat: "pid (comm) state ..."; comm may contain spaces, so read after the last ')'.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.charAt(stat.lastIndexOf(')') + 2) !== 'Z';
  } catch {
    return true;
  }
}

/** The command line of `pid` joined by spaces, or '' when it cannot be read (Linux /proc). */
export async function commandLine(pid: number): Promise<string> {
  try {
    return (await readFile(`/proc/${pid}/cmdline`, 'utf8')).split('\0').join(' ').trim();
  } catch {
    return '';
  }
}

/** Sends SIGTERM to `pid`, waits for it to exit, and sends SIGKILL after `graceMs`. Idempotent. */
export async function stopPid(pid: number, graceMs = 5000): Promise<void> {
  if (!isAlive(pid)) return;
  try {
    process.kill(pid, 'SIGTERM');
  } catch {
    return;
  }
  const deadline = Date.now() + graceMs;
  while (isAlive(pid)) {
    if (Date.now() > deadline) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        return;
      }
      for (let i = 0; i < 50 && isAlive(pid); i++) await sleep(100);
      return;
    }
    await sleep(50);
  }
}

/** The last `maxBytes` of a log file, for error messages; '' when it does not exist. */
export async function tailFile(path: string, maxBytes = 4000): Promise<string> {
  try {
    const handle = await open(path, 'r');
    try {
      const { size } = await handle.stat();
      const length = Math.min(size, maxBytes);
      const buffer = Buffer.alloc(length);
      await handle.read(buffer, 0, length, size - length);
      return buffer.toString('utf8');
    } finally {
      await handle.close();
    }
  } catch {
    return '';
  }
}

export interface StartServerOptions {
  /** Names the server in the error thrown when it does not start: `<name> did not start: …`. */
  name: string;
  /** The executable (an absolute path where the server re-executes itself, as sshd does). */
  bin: string;
  /** Its arguments for the port of this attempt. Secrets go in `env`, never here (the process list shows argv). */
  args: (port: number) => string[];
  /** Appended to (never truncated): the server's stdout and stderr; its tail goes into start errors. */
  logPath: string;
  /** Environment of the server; this process's when undefined. */
  env?: ChildEnv;
  /** Listen on this port; a start that fails is then not retried. A free 127.0.0.1 port otherwise. */
  port?: number;
  /** How long the server may take to accept connections on its port. */
  timeoutMs: number;
  /**
   * Own process group and unref'd, so the server outlives this process (default true). When
   * false it stays in our group (a terminal's Ctrl-C stops it with us) and keeps our event loop alive.
   */
  detached?: boolean;
  /** Write `--- <ISO time> <bin> <args>` into the log before each attempt (default false). */
  stampLog?: boolean;
  /** Runs before each spawn with that attempt's port, e.g. to write a config file naming it. */
  beforeSpawn?: (port: number) => void | Promise<void>;
  /** Runs once the process exists, before waiting for its port, e.g. to record its pid. */
  onSpawn?: (pid: number, port: number) => void | Promise<void>;
}

/** A server {@link startServerProcess} saw accept connections. */
export interface StartedServerProcess {
  pid: number;
  port: number;
}

/**
 * Starts a server process listening on 127.0.0.1 and resolves once its port accepts TCP.
 *
 * Each attempt picks a free port (unless `port` is given), runs `beforeSpawn`, spawns `bin` with
 * stdin ignored and stdout/stderr appended to `logPath`, waits for the process to exist (a spawn
 * error, e.g. a missing binary, rejects at once), runs `onSpawn`, then waits up to `timeoutMs` for
 * the port, giving up early when the process exits. On failure the process is stopped (SIGTERM,
 * then SIGKILL); when it had exited (most likely another process took the free port before it
 * bound it) and no fixed `port` was asked for, a fresh port is tried, up to 3 attempts in all.
 * Otherwise it throws `<name> did not start: <reason>` followed by the tail of `logPath`.
 * Stopping the server later is the caller's job (e.g. {@link stopPid}).
 */
export async function startServerProcess(opts: StartServerOptions): Promise<StartedServerProcess> {
  const detached = opts.detached ?? true;
  for (let attempt = 1; ; attempt++) {
    const port = opts.port ?? (await freeLoopbackPort());
    await opts.beforeSpawn?.(port);
    const args = opts.args(port);
    const logFd = openSync(opts.logPath, 'a');
    if (opts.stampLog) writeSync(logFd, `\n--- ${new Date().toISOString()} ${opts.bin} ${args.join(' ')}\n`);
    const child = spawn(opts.bin, args, { detached, stdio: ['ignore', logFd, logFd], env: opts.env as NodeJS.ProcessEnv });
    closeSync(logFd);
    const pid = await new Promise<number>((ok, fail) => {
      child.once('spawn', () => ok(child.pid!));
      child.once('error', fail);
    });
    let exited = false;
    child.once('exit', () => (exited = true));
    await opts.onSpawn?.(pid, port);
    try {
      await waitForTcp(port, { timeoutMs: opts.timeoutMs, stillRunning: () => !exited });
    } catch (err) {
      await stopPid(pid);
      if (exited && attempt < 3 && opts.port === undefined) continue;
      throw new Error(`${opts.name} did not start: ${(err as Error).message}\n--- end of ${opts.logPath} ---\n${await tailFile(opts.logPath)}`);
    }
    if (detached) child.unref();
    return { pid, port };
  }
}
