import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
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
