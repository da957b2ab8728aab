import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startStack, type Stack } from '../src/stack.js';
import { cliEnv, jsonOf, runCli, type CliRun } from './support/cli.js';

/**
 * `xfer auth …` run as the built binary against a real control plane and a real Secret Service: a
 * session bus (`dbus-daemon`) and `gnome-keyring-daemon` of the test's own, in a temporary HOME,
 * with the login keyring created and unlocked headlessly from a password on stdin. The keyring
 * lives for the whole file, so it persists across xfer runs as a desktop session's does. The
 * fallback path (no D-Bus session at all) is cli-auth.e2e.test.ts.
 *
 * The Debian packages dbus-daemon, gnome-keyring and libsecret-tools are required: .ci/run installs
 * them, and without them this test fails (it does not skip), as the keychain path is the default
 * on every desktop.
 */
const TOOLS = [
  ['dbus-daemon', 'dbus-daemon'],
  ['dbus-send', 'dbus-bin'],
  ['gnome-keyring-daemon', 'gnome-keyring'],
  ['secret-tool', 'libsecret-tools'],
] as const;
const SECRETS = 'org.freedesktop.secrets';
const KEYRING_PASSWORD = 'xfer-e2e-keyring';
/** Bounds every command: an xfer waiting on an unlock prompt nobody can answer would stop here, and fail. */
const RUN_TIMEOUT_MS = 20_000;

interface Run { status: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }

function run(cmd: string, args: string[], env: Record<string, string>, input = ''): Run {
  const res = spawnSync(cmd, args, { env, input, encoding: 'utf8', timeout: RUN_TIMEOUT_MS });
  if (res.error && (res.error as NodeJS.ErrnoException).code !== 'ETIMEDOUT') throw res.error;
  return { status: res.status, signal: res.signal, stdout: res.stdout, stderr: res.stderr };
}

/** A daemon child with its stdout kept apart (dbus-daemon prints its address there, warnings on stderr). */
interface Daemon { child: ChildProcess; stdout: () => string; stderr: () => string; exited: Promise<void> }

function spawnDaemon(cmd: string, args: string[], env: Record<string, string>, input?: string): Daemon {
  const child = spawn(cmd, args, { env, stdio: [input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  if (input !== undefined) child.stdin!.end(input);
  const exited = new Promise<void>((res) => child.once('exit', () => res()));
  return { child, stdout: () => out, stderr: () => err, exited };
}

async function stopDaemon(d: Daemon | undefined): Promise<void> {
  if (!d || d.child.exitCode !== null || d.child.signalCode !== null) return;
  d.child.kill('SIGTERM');
  await d.exited;
}

async function until(what: string, check: () => boolean, detail: () => string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`${what} within ${timeoutMs} ms: ${detail()}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** The session bus and the keyring daemon, and an independent reader of what xfer stored: secret-tool. */
class SecretService {
  private bus?: Daemon;
  private keyring?: Daemon;
  /** What every process of the session gets; XDG_RUNTIME_DIR must be a 0700 directory for gnome-keyring's sockets. */
  env: Record<string, string>;

  constructor(private readonly root: string) {
    const runtime = join(root, 'run');
    mkdirSync(runtime, { mode: 0o700 });
    mkdirSync(join(root, 'home'));
    // No DISPLAY or WAYLAND_DISPLAY: the unlock prompter (gcr-prompter) cannot show, as on a headless machine.
    this.env = { PATH: process.env.PATH ?? '', HOME: join(root, 'home'), XDG_RUNTIME_DIR: runtime };
  }

  static requireTools(): void {
    const missing = TOOLS.filter(([tool]) => (spawnSync(tool, ['--version']).error as NodeJS.ErrnoException | undefined)?.code === 'ENOENT');
    if (missing.length) {
      throw new Error(`The keychain test needs a real Secret Service; not installed: ${missing.map(([t]) => t).join(', ')}. `
        + `Install with: apt-get install ${[...new Set(missing.map(([, pkg]) => pkg))].join(' ')} (.ci/run installs them)`);
    }
  }

  /**
   * With `keyring: false` only the bus: the first keychain call then has dbus-daemon start
   * gnome-keyring-daemon on demand, with no login keyring, as in a session nobody logged in to
   * graphically (it exits with the bus).
   */
  async start({ keyring = true } = {}): Promise<void> {
    // The standard session configuration, so the keyring can ask for its unlock prompter by D-Bus activation as on a desktop.
    this.bus = spawnDaemon('dbus-daemon', ['--session', '--nofork', '--print-address=1'], this.env);
    await until('dbus-daemon printed no address', () => this.bus!.stdout().includes('\n'), () => this.bus!.stderr());
    this.env = { ...this.env, DBUS_SESSION_BUS_ADDRESS: this.bus.stdout().split('\n')[0]! };
    if (keyring) await this.startKeyring();
  }

  /**
   * Starts gnome-keyring-daemon with the password on stdin (`--unlock`): it creates the login
   * keyring, the default collection, on the first start, and unlocks it on the next ones.
   */
  async startKeyring(): Promise<void> {
    const keyring = spawnDaemon('gnome-keyring-daemon', ['--foreground', '--unlock', '--components=secrets'], this.env, KEYRING_PASSWORD);
    this.keyring = keyring;
    // Asking the service itself before it is there would make dbus-daemon start a second, locked keyring daemon.
    await until('gnome-keyring-daemon did not take org.freedesktop.secrets', () => {
      if (keyring.child.exitCode !== null) throw new Error(`gnome-keyring-daemon exited (${keyring.child.exitCode}): ${keyring.stderr()}`);
      return this.hasSecretsOwner();
    }, () => keyring.stderr());
    if (this.locked()) throw new Error(`gnome-keyring-daemon did not unlock the login keyring: ${keyring.stderr()}`);
  }

  /** Stops the keyring daemon and starts it again unlocked: the headless way to unlock a locked keyring. */
  async restartUnlocked(): Promise<void> {
    await stopDaemon(this.keyring);
    await this.startKeyring();
  }

  /** Locks the default collection, as a screen lock or `secret-tool lock` does. */
  lock(): void {
    this.dbus(SECRETS, '/org/freedesktop/secrets', 'org.freedesktop.Secret.Service.Lock', 'array:objpath:/org/freedesktop/secrets/aliases/default');
  }

  locked(): boolean {
    const answer = this.dbus(SECRETS, '/org/freedesktop/secrets/aliases/default', 'org.freedesktop.DBus.Properties.Get',
      'string:org.freedesktop.Secret.Collection', 'string:Locked');
    if (!/boolean (true|false)$/.test(answer)) throw new Error(`unexpected Locked property: ${answer}`);
    return answer.endsWith('true');
  }

  /** The item xfer stores for a profile, read with libsecret by the attributes the keyring crate writes. */
  lookup(profile: string): Run {
    return run('secret-tool', ['lookup', 'service', 'xfer', 'username', profile], this.env);
  }

  /**
   * Every xfer item: `[/path]`, `label = …`, `secret = …` (when unlocked) on stdout, and
   * `attribute.name = value` lines, which secret-tool prints on stderr: returned together.
   */
  search(): string {
    const res = run('secret-tool', ['search', '--all', 'service', 'xfer'], this.env);
    return res.stdout + res.stderr;
  }

  /** Profiles that have an xfer item, from the attributes (readable even when the keyring is locked). */
  profiles(): string[] {
    return [...this.search().matchAll(/^attribute\.username = (.*)$/gm)].map((m) => m[1]!).sort();
  }

  clear(): void {
    run('secret-tool', ['clear', 'service', 'xfer'], this.env);
  }

  async stop(): Promise<void> {
    await stopDaemon(this.keyring);
    // A keyring daemon the bus started on demand is the bus's child: end it while the bus is there
    // to reap it, and wait until it has (a signal 0 then fails), so no zombie outlives the test.
    if (this.bus && this.bus.child.exitCode === null && this.hasSecretsOwner()) {
      const reply = this.dbus('org.freedesktop.DBus', '/org/freedesktop/DBus', 'org.freedesktop.DBus.GetConnectionUnixProcessID', `string:${SECRETS}`);
      const pid = Number(/uint32 (\d+)/.exec(reply)?.[1]);
      process.kill(pid, 'SIGTERM');
      await until(`gnome-keyring-daemon ${pid} was not reaped`, () => {
        try { process.kill(pid, 0); return false; } catch { return true; }
      }, () => reply);
    }
    await stopDaemon(this.bus);
  }

  /** NameHasOwner, not a call to the service itself: that would make dbus-daemon start a keyring daemon. */
  private hasSecretsOwner(): boolean {
    return this.dbus('org.freedesktop.DBus', '/org/freedesktop/DBus', 'org.freedesktop.DBus.NameHasOwner', `string:${SECRETS}`) === 'boolean true';
  }

  private dbus(dest: string, path: string, method: string, ...args: string[]): string {
    const res = run('dbus-send', ['--session', '--print-reply=literal', `--dest=${dest}`, path, method, ...args], this.env);
    if (res.status !== 0) throw new Error(`dbus-send ${method}: ${res.stderr}`);
    return res.stdout.trim().replace(/\s+/g, ' ');
  }
}

let stack: Stack;
let secrets: SecretService;
let secretsRoot: string;
let home: string;

/** The built xfer in the D-Bus session of `session` (the shared one unless given), with a config directory of its own per test. */
const xfer = (args: string[], input = '', session = secrets): CliRun => runCli(args, {
  env: cliEnv(home, { XDG_RUNTIME_DIR: session.env.XDG_RUNTIME_DIR, DBUS_SESSION_BUS_ADDRESS: session.env.DBUS_SESSION_BUS_ADDRESS }),
  input,
  timeoutMs: RUN_TIMEOUT_MS,
});

const configFile = () => join(home, '.config', 'xfer', 'config.json');
const credentialsFile = () => join(home, '.config', 'xfer', 'credentials.json');

/** A fresh key with connections:read, so tests can tell keys apart and revoke one. */
async function createKey(): Promise<{ id: string; key: string }> {
  return stack.api.data('POST', '/api-keys', { name: `keychain ${randomBytes(3).toString('hex')}`, scopes: ['connections:read'] });
}

beforeAll(async () => {
  SecretService.requireTools();
  secretsRoot = mkdtempSync(join(tmpdir(), 'xfer-secret-service-'));
  secrets = new SecretService(secretsRoot);
  await secrets.start();
  stack = await startStack({ env: process.env });
}, 120_000);

beforeEach(() => {
  home = mkdtempSync(join(tmpdir(), 'xfer-cli-keychain-'));
});

afterEach(async () => {
  if (home) rmSync(home, { recursive: true, force: true });
  // Each test starts from an unlocked, empty keychain, whatever the previous one left.
  if (secrets?.locked()) await secrets.restartUnlocked();
  secrets?.clear();
});

afterAll(async () => {
  await secrets?.stop();
  if (secretsRoot) rmSync(secretsRoot, { recursive: true, force: true });
  await stack?.stop();
}, 60_000);

test('login stores the key in the Secret Service without a word on stderr, and every command reads it from there', () => {
  const key = stack.api.token;
  const login = xfer(['auth', 'login', '--url', stack.url, '--json'], `${key}\n`);
  expect(login).toMatchObject({ status: 0, stderr: '' });
  expect(jsonOf(login)).toEqual({ profile: 'default', url: stack.url, auth: 'api-key', stored_in: 'keychain', expires_at: null });
  expect(existsSync(credentialsFile())).toBe(false);
  expect(readFileSync(configFile(), 'utf8')).not.toContain(key);
  expect(JSON.parse(readFileSync(configFile(), 'utf8'))).toEqual({ profiles: { default: { url: stack.url, auth: 'api-key' } } });

  // An independent reader (libsecret) finds exactly the key, under the attributes the Rust keyring crate writes.
  expect(secrets.lookup('default')).toMatchObject({ status: 0, stdout: key });
  const item = secrets.search();
  const attributes = Object.fromEntries([...item.matchAll(/^attribute\.(\S+) = (.*)$/gm)].map((m) => [m[1], m[2]]));
  expect(attributes).toEqual({ service: 'xfer', username: 'default' });
  expect(item).toMatch(/^label = keyring:default@xfer$/m);

  const status = xfer(['auth', 'status', '--json']);
  expect(status).toMatchObject({ status: 0, stderr: '' });
  expect(jsonOf(status)).toEqual({
    profile: 'default', url: stack.url, url_source: 'profile "default"', api_path_added: false, source: 'keychain', auth: 'api-key', expires_at: null,
  });
  const list = xfer(['connections', 'list', '--json']);
  expect(list).toMatchObject({ status: 0, stderr: '' });
  expect(Array.isArray(jsonOf(list))).toBe(true);

  // Without --json the person is told where the secret went.
  expect(xfer(['auth', 'login', '--url', stack.url], key).stdout).toBe(`Logged in to ${stack.url} as profile "default" (secret in the keychain)\n`);
  expect(secrets.profiles()).toEqual(['default']);
});

test('two profiles keep two keychain items, and logout removes only its own', async () => {
  const [a, b] = [await createKey(), await createKey()];
  expect(xfer(['auth', 'login', '--url', stack.url], a.key)).toMatchObject({ status: 0, stderr: '' });
  expect(xfer(['auth', 'login', '--url', stack.url, '--profile', 'ci'], b.key)).toMatchObject({ status: 0, stderr: '' });
  expect(secrets.lookup('default').stdout).toBe(a.key);
  expect(secrets.lookup('ci').stdout).toBe(b.key);
  expect(secrets.profiles()).toEqual(['ci', 'default']);

  const logout = xfer(['auth', 'logout', '--json']);
  expect(logout).toMatchObject({ status: 0, stderr: '' });
  expect(jsonOf(logout)).toEqual({ profile: 'default', removed: true });
  expect(secrets.lookup('default')).toMatchObject({ status: 1, stdout: '' });
  expect(secrets.lookup('ci')).toMatchObject({ status: 0, stdout: b.key });
  expect(secrets.profiles()).toEqual(['ci']);

  expect(xfer(['auth', 'status'])).toMatchObject({ status: 3, stderr: expect.stringMatching(/^Error: Not logged in \(profile "default"\)/) });
  const ci = xfer(['auth', 'status', '--profile', 'ci', '--json']);
  expect(ci.status).toBe(0);
  expect(jsonOf(ci)).toMatchObject({ profile: 'ci', source: 'keychain' });

  expect(jsonOf(xfer(['auth', 'logout', '--profile', 'ci', '--json']))).toEqual({ profile: 'ci', removed: true });
  expect(secrets.profiles()).toEqual([]);
  expect(jsonOf(xfer(['auth', 'logout', '--profile', 'ci', '--json']))).toEqual({ profile: 'ci', removed: false });
});

test('a locked keyring never hangs and never loses a secret: reads and logout say it is locked, login falls back with a warning', async () => {
  const [older, newer] = [await createKey(), await createKey()];
  expect(xfer(['auth', 'login', '--url', stack.url], older.key)).toMatchObject({ status: 0, stderr: '' });
  secrets.lock();
  expect(secrets.locked()).toBe(true);

  // The item is there but cannot be opened: say so (exit 3, as for "not logged in"), not "not logged in".
  const started = Date.now();
  const status = xfer(['auth', 'status', '--json']);
  expect(status).toMatchObject({ status: 3, stdout: '' });
  expect(JSON.parse(status.stderr).error).toMatch(/^The OS keychain holding the secret of profile "default" is locked: unlock it and run the command again \(.*unlock prompt was dismissed\)$/);
  expect(Date.now() - started).toBeLessThan(10_000);

  // Logout refuses rather than report success with the secret left in the keychain, and keeps the profile.
  const logout = xfer(['auth', 'logout']);
  expect(logout).toMatchObject({ status: 3, stdout: '' });
  expect(logout.stderr).toMatch(/^Error: The OS keychain holding the secret of profile "default" is locked/);
  expect(secrets.profiles()).toEqual(['default']);
  expect(JSON.parse(readFileSync(configFile(), 'utf8')).profiles).toHaveProperty('default');

  // A new login cannot replace the locked item: it goes to the 0600 file, with the one warning line saying why.
  const login = xfer(['auth', 'login', '--url', stack.url, '--json'], newer.key);
  expect(login.status).toBe(0);
  expect(jsonOf(login)).toMatchObject({ stored_in: 'file' });
  expect(login.stderr).toMatch(/^Warning: the OS keychain is unavailable \(.*unlock prompt was dismissed\); the secret is stored in .*credentials\.json \(mode 0600\)\n$/);
  expect(statSync(credentialsFile()).mode & 0o777).toBe(0o600);
  expect(JSON.parse(readFileSync(credentialsFile(), 'utf8'))).toEqual({ profiles: { default: { secret: newer.key } } });
  expect(jsonOf(xfer(['auth', 'status', '--json']))).toMatchObject({ source: 'file' });

  // Once unlocked, the older keychain item is still there, but the newer secret wins: with the
  // older key revoked, commands still work.
  await secrets.restartUnlocked();
  expect(secrets.lookup('default').stdout).toBe(older.key);
  await stack.api.data('DELETE', `/api-keys/${older.id}`);
  const after = xfer(['auth', 'status', '--json']);
  expect(after).toMatchObject({ status: 0, stderr: '' });
  expect(jsonOf(after)).toMatchObject({ source: 'file' });

  // Logging in again with the keychain open moves the secret back there and empties the file.
  expect(xfer(['auth', 'login', '--url', stack.url], newer.key)).toMatchObject({ status: 0, stderr: '' });
  expect(secrets.lookup('default').stdout).toBe(newer.key);
  expect(JSON.parse(readFileSync(credentialsFile(), 'utf8'))).toEqual({ profiles: {} });
  expect(jsonOf(xfer(['auth', 'status', '--json']))).toMatchObject({ source: 'keychain' });
  expect(jsonOf(xfer(['auth', 'logout', '--json']))).toEqual({ profile: 'default', removed: true });
  expect(secrets.profiles()).toEqual([]);
}, 60_000);

test('a session bus whose keyring has no login collection: login falls back to the file with the warning, never hangs', async () => {
  const root = mkdtempSync(join(tmpdir(), 'xfer-secret-service-bare-'));
  const bare = new SecretService(root);
  try {
    await bare.start({ keyring: false });
    const login = xfer(['auth', 'login', '--url', stack.url, '--json'], stack.api.token, bare);
    expect(login.status).toBe(0);
    expect(jsonOf(login)).toMatchObject({ stored_in: 'file' });
    expect(login.stderr).toMatch(/^Warning: the OS keychain is unavailable \(.*Secret Service: no result found\); the secret is stored in .*credentials\.json \(mode 0600\)\n$/);
    expect(JSON.parse(readFileSync(credentialsFile(), 'utf8'))).toEqual({ profiles: { default: { secret: stack.api.token } } });
    expect(bare.profiles()).toEqual([]);
    const status = xfer(['auth', 'status', '--json'], '', bare);
    expect(status).toMatchObject({ status: 0, stderr: '' });
    expect(jsonOf(status)).toMatchObject({ source: 'file' });
    // The shared keyring of the other tests saw nothing.
    expect(secrets.profiles()).toEqual([]);
  } finally {
    await bare.stop();
    rmSync(root, { recursive: true, force: true });
  }
});
