import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Messages } from '@xfer/shared';
import { startStack, type Stack } from '../src/stack.js';
import { cliEnv, runCli, type CliRun } from './support/cli.js';

/**
 * `xfer auth login|status|logout` run as the built binary against a real control plane, in a
 * HOME of its own with no D-Bus session: no keychain is reachable, so the secret must land in the
 * 0600 fallback file with a warning, and every other behaviour must hold on that path.
 */
let stack: Stack;
let home: string;

const xfer = (args: string[], o: { input?: string; env?: Record<string, string> } = {}): CliRun =>
  runCli(args, { env: cliEnv(home, o.env), input: o.input });

const credentialsFile = () => join(home, '.config', 'xfer', 'credentials.json');

beforeAll(async () => {
  stack = await startStack({ env: process.env });
}, 120_000);

beforeEach(() => {
  home = mkdtempSync(join(tmpdir(), 'xfer-cli-home-'));
});

afterEach(() => rmSync(home, { recursive: true, force: true }));

afterAll(async () => {
  await stack?.stop();
}, 60_000);

test('login with an API key from stdin stores it in a 0600 file with a one-line warning when no keychain is reachable', () => {
  const login = xfer(['auth', 'login', '--url', stack.url], { input: `${stack.api.token}\n` });
  expect(login.status).toBe(0);
  const warnings = login.stderr.trim().split('\n');
  expect(warnings).toHaveLength(1);
  expect(warnings[0]).toMatch(/^Warning: the OS keychain is unavailable .*credentials\.json \(mode 0600\)$/);
  expect(statSync(credentialsFile()).mode & 0o777).toBe(0o600);
  expect(statSync(join(home, '.config', 'xfer')).mode & 0o777).toBe(0o700);
  expect(JSON.parse(readFileSync(credentialsFile(), 'utf8'))).toEqual({ profiles: { default: { secret: stack.api.token } } });
  expect(JSON.parse(readFileSync(join(home, '.config', 'xfer', 'config.json'), 'utf8'))).toEqual({ profiles: { default: { url: stack.url, auth: 'api-key' } } });

  const status = xfer(['auth', 'status', '--json']);
  expect(status.status).toBe(0);
  expect(JSON.parse(status.stdout)).toEqual({
    profile: 'default', url: stack.url, url_source: 'profile "default"', api_path_added: false, source: 'file', auth: 'api-key', expires_at: null,
  });
  expect(xfer(['auth', 'status']).stdout).toContain(`${stack.url} (from profile "default")`);
});

test('the server URL works with or without /api/v1 (as npm start prints it), and auth status says which API URL it used', () => {
  expect(stack.url).toMatch(/\/api\/v1$/);
  const server = stack.url.replace(/\/api\/v1$/, '');
  for (const given of [server, `${server}/`, `${stack.url}/`]) {
    rmSync(home, { recursive: true, force: true });
    const login = xfer(['auth', 'login', '--url', given], { input: stack.api.token });
    expect({ given, status: login.status, stderr: login.stderr }).toMatchObject({ status: 0 });
    expect(JSON.parse(readFileSync(join(home, '.config', 'xfer', 'config.json'), 'utf8')).profiles.default.url).toBe(stack.url);
    expect(xfer(['connections', 'list', '--json']).status).toBe(0);
  }
  const env = { XFER_API_KEY: stack.api.token, XFER_URL: server };
  const list = xfer(['connections', 'list', '--json'], { env });
  expect(list.status).toBe(0);
  expect(Array.isArray(JSON.parse(list.stdout))).toBe(true);
  const status = xfer(['auth', 'status', '--json'], { env });
  expect(status.status).toBe(0);
  expect(JSON.parse(status.stdout)).toMatchObject({ url: stack.url, url_source: 'XFER_URL', api_path_added: true, source: 'env' });
  expect(xfer(['auth', 'status'], { env }).stdout).toContain(`${stack.url} (/api/v1 added to the URL from XFER_URL)`);
  const health = xfer(['health', '--json', '--url', server]);
  expect(health.status).toBe(0);
});

test('login with a wrong key exits 3 with the server error as one stderr line, and stores nothing', () => {
  const bad = xfer(['auth', 'login', '--url', stack.url, '--api-key', `xfk_${randomBytes(16).toString('hex')}`]);
  expect(bad.status).toBe(3);
  expect(bad.stdout).toBe('');
  expect(bad.stderr).toBe(`Error: ${Messages.unauthenticated}\n`);
  expect(existsSync(credentialsFile())).toBe(false);

  const json = xfer(['auth', 'login', '--url', stack.url, '--api-key', 'nope', '--json']);
  expect(json.status).toBe(3);
  expect(json.stdout).toBe('');
  expect(json.stderr.split('\n').filter(Boolean)).toHaveLength(1);
  expect(JSON.parse(json.stderr)).toEqual({ error: Messages.unauthenticated });
});

test('XFER_API_KEY and XFER_URL override the stored profile', () => {
  expect(xfer(['auth', 'login', '--url', stack.url], { input: stack.api.token }).status).toBe(0);
  const env = xfer(['auth', 'status', '--json'], { env: { XFER_API_KEY: 'xfk_wrong', XFER_URL: stack.url } });
  expect(env.status).toBe(3);
  expect(JSON.parse(env.stderr)).toEqual({ error: Messages.unauthenticated });

  const fresh = mkdtempSync(join(tmpdir(), 'xfer-cli-env-'));
  try {
    const ok = xfer(['connections', 'list', '--json'], { env: { XDG_CONFIG_HOME: fresh, XFER_API_KEY: stack.api.token, XFER_URL: stack.url } });
    expect(ok.status).toBe(0);
    expect(Array.isArray(JSON.parse(ok.stdout))).toBe(true);
    expect(existsSync(join(fresh, 'xfer'))).toBe(false);
  } finally {
    rmSync(fresh, { recursive: true, force: true });
  }
});

test('login with --email and --password-stdin stores a session token that the API accepts', async () => {
  const email = `cli-${randomBytes(4).toString('hex')}@example.test`;
  const password = randomBytes(12).toString('hex');
  await stack.api.data('POST', '/users', { email, role: 'admin', password });

  const login = xfer(['auth', 'login', '--url', stack.url, '--email', email, '--password-stdin', '--json'], { input: `${password}\n` });
  expect(login.status).toBe(0);
  const result = JSON.parse(login.stdout) as { auth: string; stored_in: string; expires_at: string };
  expect(result).toMatchObject({ profile: 'default', url: stack.url, auth: 'session', stored_in: 'file' });
  expect(Date.parse(result.expires_at)).toBeGreaterThan(Date.now());
  const stored = JSON.parse(readFileSync(credentialsFile(), 'utf8')).profiles.default.secret as string;
  expect(stored).not.toBe(stack.api.token);
  expect(xfer(['connections', 'list', '--json']).status).toBe(0);

  const wrong = xfer(['auth', 'login', '--url', stack.url, '--email', email, '--password-stdin', '--profile', 'other'], { input: 'wrong-password' });
  expect(wrong.status).toBe(3);
  expect(wrong.stderr).toBe(`Error: ${Messages.unauthenticated}\n`);
});

test('profiles keep separate secrets, and logout removes only its own', () => {
  expect(xfer(['auth', 'login', '--url', stack.url], { input: stack.api.token }).status).toBe(0);
  expect(xfer(['auth', 'login', '--url', stack.url, '--profile', 'ci'], { input: stack.api.token }).status).toBe(0);

  const logout = xfer(['auth', 'logout', '--json']);
  expect(logout.status).toBe(0);
  expect(JSON.parse(logout.stdout)).toEqual({ profile: 'default', removed: true });
  expect(JSON.parse(readFileSync(credentialsFile(), 'utf8')).profiles).toEqual({ ci: { secret: stack.api.token } });

  const after = xfer(['auth', 'status']);
  expect(after.status).toBe(3);
  expect(after.stderr).toMatch(/^Error: Not logged in \(profile "default"\).*\n$/);
  expect(xfer(['auth', 'status', '--profile', 'ci']).status).toBe(0);
  expect(JSON.parse(xfer(['auth', 'status', '--json'], { env: { XFER_PROFILE: 'ci' } }).stdout)).toMatchObject({ profile: 'ci' });
});

test('usage errors exit 2 with one stderr line', () => {
  const bad = xfer(['auth', 'status', '--bogus']);
  expect(bad.status).toBe(2);
  expect(bad.stderr.split('\n').filter(Boolean)).toEqual([expect.stringMatching(/^Error: Nonexistent flag: --bogus/)]);
  const json = xfer(['auth', 'login', '--password-stdin', '--json']);
  expect(json.status).toBe(2);
  expect(JSON.parse(json.stderr).error).toMatch(/--email/);
  const unknown = xfer(['connections', 'frobnicate']);
  expect(unknown.status).toBe(2);
  expect(unknown.stderr).toBe('Error: command connections:frobnicate not found\n');
  expect(JSON.parse(xfer(['frobnicate', '--json']).stderr)).toEqual({ error: 'command frobnicate not found' });
  const badUrl = xfer(['connections', 'list'], { env: { XFER_URL: 'xfer.example.com', XFER_API_KEY: stack.api.token } });
  expect(badUrl.status).toBe(2);
  expect(badUrl.stderr).toBe('Error: The server URL from XFER_URL is not an http(s) URL: xfer.example.com (expected e.g. https://xfer.example.com, with or without /api/v1)\n');
  expect(xfer(['auth', 'login', '--url', 'ftp://host/api/v1'], { input: stack.api.token }).status).toBe(2);
  expect(existsSync(credentialsFile())).toBe(false);
});

test('an unreachable server is exit 6 after the retries, named in one stderr line', async () => {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as { port: number };
  await new Promise((r) => server.close(r));
  const res = xfer(['connections', 'list', '--json'], { env: { XFER_URL: `http://127.0.0.1:${port}/api/v1`, XFER_API_KEY: stack.api.token } });
  expect(res.status).toBe(6);
  expect(res.stdout).toBe('');
  expect(res.stderr.split('\n').filter(Boolean)).toHaveLength(1);
  expect(JSON.parse(res.stderr).error).toContain(`127.0.0.1:${port}`);
  // Without --json, people see each retry coming.
  const human = xfer(['connections', 'list'], { env: { XFER_URL: `http://127.0.0.1:${port}/api/v1`, XFER_API_KEY: stack.api.token } });
  expect(human.status).toBe(6);
  const lines = human.stderr.split('\n').filter(Boolean);
  expect(lines).toHaveLength(5);
  expect(lines[0]).toMatch(new RegExp(`^Warning: Connection refused to http://127\\.0\\.0\\.1:${port}.* \\(retrying in \\d+ s, attempt 2 of 5\\)$`));
  expect(lines[4]).toMatch(/^Error: Connection refused/);
}, 60_000);

test('every command has a description and examples in its help', () => {
  const commands = ['auth login', 'auth status', 'auth logout', 'connections list', 'connections get', 'connections create',
    'connections update', 'connections delete', 'connections test', 'api-keys list', 'api-keys create', 'api-keys revoke'];
  for (const command of commands) {
    const help = xfer([...command.split(' '), '--help']);
    expect({ command, status: help.status }).toEqual({ command, status: 0 });
    expect(help.stdout).toMatch(/\nDESCRIPTION\n {2}\S/);
    expect(help.stdout.slice(help.stdout.indexOf('\nEXAMPLES\n'))).toContain(`xfer ${command}`);
  }
});
