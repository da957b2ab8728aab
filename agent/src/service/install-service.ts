/**
 * `xfer-agent install-service`: writes the agent's systemd unit (with the absolute path of the
 * binary that runs this command) and its environment file (URL and token, mode 0600). It runs no
 * systemctl: it prints the next steps, so it can also write into an image or a chroot, and never
 * restarts a running agent behind the operator's back. docs/operations.md "Running the agent as
 * a service".
 */
import { randomBytes } from 'node:crypto';
import { accessSync, closeSync, constants, existsSync, fchmodSync, fsyncSync, linkSync, mkdirSync, openSync, renameSync, rmSync, statSync, writeSync } from 'node:fs';
import { basename, dirname, isAbsolute, join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { parseAgentConfig, UsageError } from '../config.js';
import { isSea } from '../runtime.js';
import { DEFAULT_NAME, HOME_DIRS, isUnder, renderAgentUnit } from './unit.js';

export const INSTALL_SERVICE_HELP = `xfer-agent install-service — write a systemd unit and environment file for this agent

Usage:
  XFER_AGENT_TOKEN=agt_… xfer-agent install-service --url URL [options]
  xfer-agent install-service --url URL --token-stdin [options] < token-file
  xfer-agent install-service --print [options]

  --url URL            the control plane's base URL (as for start; repeat for several instances)
  --token-stdin        read the agent token from the first line of stdin (else XFER_AGENT_TOKEN;
                       never a flag: flags show in ps)
  --name NAME          unit name (default xfer-agent): NAME.service, ENV_DIR/NAME.env,
                       state in /var/lib/NAME
  --unit-dir DIR       where the unit goes (default /etc/systemd/system)
  --env-dir DIR        where the environment file goes (default /etc/xfer; mode 0600)
  --user USER          run as this existing user instead of a dynamic user made up by systemd
  --allow-roots DIRS   local directories the agent may use (comma-separated; needs --user):
                       XFER_AGENT_ALLOW_ROOTS in the environment file, ReadWritePaths= in the unit
  --bin PATH           the xfer-agent executable the unit runs (default: the one running now)
  --force              replace an existing unit or environment file
  --print              print the unit to stdout and write nothing (no token needed)

It does not run systemctl; it prints the commands to run next.
Exit codes: 0 written, 1 failure (e.g. no permission to write), 2 usage error.`;

const DEFAULT_UNIT_DIR = '/etc/systemd/system';
const DEFAULT_ENV_DIR = '/etc/xfer';
/** Characters a path may hold to go into ExecStart=, ReadWritePaths= and the environment file unquoted. */
const PLAIN_PATH = /^\/[A-Za-z0-9._+@/-]*$/;
/** A unit name without specifiers or template marks (no `@`, no `%`). */
const UNIT_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;
/** useradd's rule for user names. */
const USER_NAME = /^[a-z_][a-z0-9_-]{0,31}$/;
/** What POST /agents hands out: `agt_` and base64url. */
const AGENT_TOKEN = /^agt_[A-Za-z0-9_-]+$/;

/** What the command needs from its process (injected: the tests run the real binary). */
export interface InstallServiceIO {
  args: string[];
  env: Record<string, string | undefined>;
  /** The first line of stdin (for --token-stdin). */
  readStdinLine: () => Promise<string>;
  /** The program and arguments that run this xfer-agent (see {@link runningCommand}). */
  command: string[];
  out: (text: string) => void;
}

/** Parses, checks, writes; returns the exit code. Problems with the input throw UsageError. */
export async function installService(io: InstallServiceIO): Promise<number> {
  if (io.args.some((a) => a === '--token' || a.startsWith('--token='))) {
    throw new UsageError('install-service takes no --token (a flag shows in ps): pipe the token with --token-stdin, or set XFER_AGENT_TOKEN');
  }
  let values;
  try {
    ({ values } = parseArgs({
      args: io.args, strict: true, allowPositionals: false,
      options: {
        url: { type: 'string', multiple: true }, 'token-stdin': { type: 'boolean' }, name: { type: 'string' },
        'unit-dir': { type: 'string' }, 'env-dir': { type: 'string' }, user: { type: 'string' },
        'allow-roots': { type: 'string' }, bin: { type: 'string' }, force: { type: 'boolean' }, print: { type: 'boolean' },
      },
    }));
  } catch (err) {
    throw new UsageError((err as Error).message);
  }

  const name = (values.name ?? DEFAULT_NAME).replace(/\.service$/, '');
  if (!UNIT_NAME.test(name)) throw new UsageError(`--name must be a unit name of letters, digits, "-", "_" and "." (at most 64), not ${JSON.stringify(values.name)}`);
  const user = values.user ?? null;
  if (user !== null && !USER_NAME.test(user)) throw new UsageError(`--user must be a user name (lower-case letters, digits, "-", "_"), not ${JSON.stringify(user)}`);
  const allowRoots = values['allow-roots'] === undefined ? [] : values['allow-roots'].split(',').map((r) => r.trim()).filter(Boolean);
  for (const root of allowRoots) {
    if (!isAbsolute(root)) throw new UsageError(`--allow-roots: "${root}" is not an absolute path`);
  }
  const roots = [...new Set(allowRoots.map((r) => resolve(r)))];
  if (roots.length > 0 && user === null) {
    throw new UsageError('--allow-roots needs --user: files a dynamic user leaves outside its own directories belong to a UID systemd may give another service later');
  }
  for (const root of roots) {
    checkPlainPath(root, '--allow-roots');
    if (!existsSync(root)) throw new UsageError(`--allow-roots: ${root} does not exist (systemd would refuse to start the service)`);
  }
  const unitDir = resolve(values['unit-dir'] ?? DEFAULT_UNIT_DIR);
  const envDir = resolve(values['env-dir'] ?? DEFAULT_ENV_DIR);
  checkPlainPath(envDir, '--env-dir');
  const command = values.bin === undefined ? io.command : [values.bin];
  if (values.bin !== undefined && !isAbsolute(values.bin)) throw new UsageError(`--bin must be an absolute path, not ${JSON.stringify(values.bin)}`);
  for (const part of command) {
    checkPlainPath(part, values.bin === undefined ? 'the running xfer-agent' : '--bin');
    const home = HOME_DIRS.find((dir) => isUnder(part, dir));
    if (home) throw new UsageError(`${part} is under ${home}, which the unit's ProtectHome= hides from the service: install xfer-agent system-wide (docs/operations.md) or pass --bin`);
  }

  const envFile = join(envDir, `${name}.env`);
  const unit = renderAgentUnit({ name, command, envFile, user, allowRoots: roots });
  if (values.print) {
    io.out(unit);
    return 0;
  }

  const urls = values.url ?? [];
  if (urls.length === 0) throw new UsageError('--url is required: the control plane\'s base URL, e.g. https://xfer.example.com/api/v1');
  const token = values['token-stdin'] ? (await io.readStdinLine()).trim() : (io.env.XFER_AGENT_TOKEN ?? '').trim();
  if (!token) throw new UsageError(values['token-stdin'] ? 'no token on stdin' : 'no token: pipe it with --token-stdin, or set XFER_AGENT_TOKEN');
  // The agent's own checks (URL scheme, no credentials in it, …), with the agent's messages.
  const parsed = parseAgentConfig({ args: [], env: { XFER_AGENT_URL: urls.join(','), XFER_AGENT_TOKEN: token }, readFile: () => { throw new Error('no config file'); } });
  // An environment file line is unquoted: only what POST /agents issues goes in, and plain URLs.
  if (!AGENT_TOKEN.test(token)) throw new UsageError('the token must be agt_ followed by letters, digits, "-" and "_", as POST /agents shows it');
  if (parsed.urls.some((u) => /[\s"'\\$`]/.test(u))) throw new UsageError('--url must not hold spaces, quotes, "\\", "$" or "`"');
  const settings: Record<string, string> = { XFER_AGENT_URL: parsed.urls.join(','), XFER_AGENT_TOKEN: token };
  if (roots.length > 0) settings.XFER_AGENT_ALLOW_ROOTS = roots.join(',');

  for (const part of command) {
    try {
      accessSync(part, part === command[0] ? constants.X_OK : constants.R_OK);
    } catch {
      throw new UsageError(`${part} is not ${part === command[0] ? 'an executable' : 'a readable'} file: the unit would not start (pass --bin)`);
    }
  }
  if (!statSync(unitDir, { throwIfNoEntry: false })?.isDirectory()) throw new UsageError(`--unit-dir ${unitDir} is not a directory`);
  const unitFile = join(unitDir, `${name}.service`);
  if (!values.force) {
    const existing = [unitFile, envFile].find((f) => existsSync(f));
    if (existing) throw new UsageError(`${existing} exists: pass --force to replace it`);
  }
  try {
    mkdirSync(envDir, { recursive: true, mode: 0o700 });
  } catch (err) {
    throw writeError(err, envDir);
  }
  const envText = `# ${name}: written by xfer-agent install-service; read by systemd (root) only. Other settings:\n# docs/agent.md "Running it" (XFER_AGENT_MAX_JOBS, XFER_AGENT_LABELS, XFER_LOG_LEVEL, …).\n`
    + Object.entries(settings).map(([k, v]) => `${k}=${v}\n`).join('');
  for (const [file, text, mode] of [[envFile, envText, 0o600], [unitFile, unit, 0o644]] as const) {
    try {
      writeAtomically(file, text, mode, values.force ?? false);
    } catch (err) {
      throw writeError(err, dirname(file));
    }
  }

  io.out(`Wrote ${unitFile}\nWrote ${envFile} (mode 0600: the URL and the token)\n\n`
    + (user ? `The user ${user} must exist (e.g. useradd --system --no-create-home --shell /usr/sbin/nologin ${user})${roots.length > 0 ? ` and may read and write ${roots.join(', ')}` : ''}.\n\n` : '')
    + `Next:\n  systemctl daemon-reload\n  systemctl enable --now ${name}\n  journalctl -u ${name} -f\n`);
  return 0;
}

/** A permission problem said plainly (the usual cause: not run as root); anything else as it is. */
function writeError(err: unknown, dir: string): Error {
  const code = (err as NodeJS.ErrnoException).code;
  if (code === 'EACCES' || code === 'EPERM' || code === 'EROFS') return new Error(`cannot write in ${dir} (${code}): run it as root (sudo), or choose --unit-dir and --env-dir`);
  return err as Error;
}

function checkPlainPath(path: string, what: string): void {
  if (!PLAIN_PATH.test(path)) throw new UsageError(`${what}: ${JSON.stringify(path)} has characters a unit file would need escaped (spaces, quotes, "%", "$", …): use a plain path`);
}

/**
 * Writes `path` whole or not at all, never readable beyond `mode` for an instant: a new file
 * created exclusively with that mode (umask can only narrow it; fchmod restores it), synced,
 * then renamed over the old one (`replace`) or hard-linked to the name, which fails if the name
 * exists (no replacing a file created meanwhile).
 */
export function writeAtomically(path: string, text: string, mode: number, replace: boolean): void {
  const tmp = join(dirname(path), `.${basename(path)}.${randomBytes(6).toString('hex')}.tmp`);
  const fd = openSync(tmp, 'wx', mode);
  try {
    try {
      fchmodSync(fd, mode);
      writeSync(fd, text);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    if (replace) renameSync(tmp, path);
    else {
      try {
        linkSync(tmp, path);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'EEXIST') throw new UsageError(`${path} exists: pass --force to replace it`);
        throw err;
      }
    }
  } finally {
    rmSync(tmp, { force: true });
  }
}

/**
 * The program and arguments that run this xfer-agent: the executable alone when it is a single
 * executable application (the binary holds the agent), else node and the script as invoked (the
 * npm bin link, which keeps its path across upgrades).
 */
export function runningCommand(): string[] {
  return isSea() ? [process.execPath] : [process.execPath, resolve(process.argv[1])];
}

/** The first line of stdin, for --token-stdin (a pipe, a redirected file, or typed at a terminal). */
export function readStdinLine(): Promise<string> {
  if (process.stdin.isTTY) process.stderr.write('Agent token (agt_…), then Enter: ');
  return new Promise((resolvePromise, reject) => {
    let text = '';
    const done = () => {
      process.stdin.off('data', onData).off('end', done).off('error', reject);
      process.stdin.pause();
      resolvePromise(text.split('\n')[0]);
    };
    const onData = (chunk: Buffer) => {
      text += chunk.toString('utf8');
      if (text.includes('\n') || text.length > 4096) done();
    };
    process.stdin.on('data', onData).once('end', done).once('error', reject);
  });
}
