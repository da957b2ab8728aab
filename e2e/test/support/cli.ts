import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { BINARIES } from '../../src/stack.js';

/**
 * The built `xfer` binary run as a user runs it, for the CLI's e2e tests: a HOME of its own (so no
 * stored profile or keychain of the machine leaks in), its exit code, and its output.
 */

/** One finished run. */
export interface CliRun {
  status: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  /** stdout as bytes, for commands that write file content there. */
  stdoutBytes: Buffer;
  stderr: string;
}

export interface CliOptions {
  /** The whole environment of the run (see `cliEnv`). */
  env: NodeJS.ProcessEnv;
  input?: string | Buffer;
  cwd?: string;
  timeoutMs?: number;
}

/**
 * PATH, a HOME and XDG config dir under `home`, then `extra`; an `undefined` in `extra` removes
 * the variable, so a test can run without, say, XFER_API_KEY.
 */
export function cliEnv(home: string, extra: Record<string, string | undefined> = {}): NodeJS.ProcessEnv {
  const all: Record<string, string | undefined> = { PATH: process.env.PATH ?? '', HOME: home, XDG_CONFIG_HOME: join(home, '.config'), ...extra };
  return Object.fromEntries(Object.entries(all).filter(([, v]) => v !== undefined)) as NodeJS.ProcessEnv;
}

/** Runs `xfer …args` to its end. */
export function runCli(args: string[], o: CliOptions): CliRun {
  const res = spawnSync(process.execPath, [BINARIES.cli, ...args], {
    env: o.env, cwd: o.cwd, input: o.input ?? '', timeout: o.timeoutMs ?? 60_000, maxBuffer: 64 * 1024 * 1024,
  });
  if (res.error && (res.error as NodeJS.ErrnoException).code !== 'ETIMEDOUT') throw res.error;
  return { status: res.status, signal: res.signal, stdout: res.stdout.toString('utf8'), stdoutBytes: res.stdout, stderr: res.stderr.toString('utf8') };
}

/** A run in the background: `child` for signals, `printed()` for its output so far, the promise for the finished run. */
export type StartedCli = Promise<CliRun> & { child: ChildProcess; printed(): { stdout: string; stderr: string } };

/** Runs `xfer …args` in the background (see `StartedCli`). */
export function startCli(args: string[], o: CliOptions): StartedCli {
  const child = spawn(process.execPath, [BINARIES.cli, ...args], { env: o.env, cwd: o.cwd, stdio: ['pipe', 'pipe', 'pipe'] });
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  child.stdout!.on('data', (d: Buffer) => out.push(d));
  child.stderr!.on('data', (d: Buffer) => err.push(d));
  child.stdin!.end(o.input ?? '');
  const timer = setTimeout(() => child.kill('SIGKILL'), o.timeoutMs ?? 60_000);
  const done = new Promise<CliRun>((resolve) => child.on('close', (status, signal) => {
    clearTimeout(timer);
    const stdoutBytes = Buffer.concat(out);
    resolve({ status, signal, stdout: stdoutBytes.toString('utf8'), stdoutBytes, stderr: Buffer.concat(err).toString('utf8') });
  }));
  const printed = () => ({ stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8') });
  return Object.assign(done, { child, printed });
}

/** What a `--json` run printed; its exit code and stderr when it did not succeed, so a failure says why. */
export function jsonOf<T = any>(run: CliRun): T {
  if (run.status !== 0 || !run.stdout) throw new Error(`xfer exited ${run.status ?? run.signal}: ${run.stderr}`);
  return JSON.parse(run.stdout) as T;
}

/** Non-empty lines. */
export const lines = (text: string): string[] => text.split('\n').filter(Boolean);

/** How a command failed: its exit code and the error message. */
export interface CliFailure { status: number | null; error: string }

/**
 * A failed `--json` run as a script sees it: after checking that it printed nothing on stdout and
 * its error as the one `{"error"}` line on stderr, its exit code and that error.
 */
export function jsonFailure(run: CliRun): CliFailure {
  expect(run.stdout).toBe('');
  const all = lines(run.stderr);
  expect(all).toHaveLength(1);
  return { status: run.status, error: (JSON.parse(all[0]!) as { error: string }).error };
}

/** A `bin` directory under `dir` with an `xfer` command in it, as an installed CLI would be; returns its path. */
export function installXfer(dir: string): string {
  const bin = join(dir, 'bin');
  mkdirSync(bin, { recursive: true });
  writeFileSync(join(bin, 'xfer'), `#!/bin/sh\nexec "${process.execPath}" "${BINARIES.cli}" "$@"\n`);
  chmodSync(join(bin, 'xfer'), 0o755);
  return bin;
}
