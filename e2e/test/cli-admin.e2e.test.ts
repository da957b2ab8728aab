import { createHmac, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startStack, type Stack } from '../src/stack.js';
import { cliEnv, jsonFailure, jsonOf, startCli, type CliFailure, type CliRun } from './support/cli.js';
import { makeTestCertificate, WebhookReceiver, type TestCertificate } from '../src/tools/webhook-receiver.js';

/**
 * `xfer webhooks|agents|users|activity|settings …` and `xfer health` run as the built binary
 * against a real control plane, with a real HTTPS webhook receiver (loopback opened by
 * XFER_UNSAFE_WEBHOOK_ALLOW, its self-signed certificate trusted through NODE_EXTRA_CA_CERTS).
 * The binary is spawned asynchronously: the receiver lives in this process and must answer while
 * a command waits for it.
 */
const run = randomBytes(3).toString('hex');
const HOOK_PATH = `/cli-hooks-${run}`;
let stack: Stack;
let home: string;
let cert: TestCertificate;
let receiver: WebhookReceiver;

interface Opts { input?: string; env?: Record<string, string> }

const xfer = (args: string[], o: Opts = {}): Promise<CliRun> => startCli(args, { env: cliEnv(home, o.env), input: o.input });
const json = async <T = any>(args: string[], o: Opts = {}): Promise<T> => jsonOf<T>(await xfer([...args, '--json'], o));

/** A failure with --json: the exit code and the error (support/cli.ts `jsonFailure`). */
const fails = async (args: string[], opts: Opts = {}): Promise<CliFailure> => jsonFailure(await xfer([...args, '--json'], opts));

const newUser = async (role: string) => {
  const email = `cli-${role}-${randomBytes(4).toString('hex')}@example.test`;
  const password = randomBytes(12).toString('hex');
  const user = await stack.api.data<{ id: string }>('POST', '/users', { email, role, password });
  return { id: user.id, email, password };
};

/** Logs a user in with a password, as profile `profile`, for the settings (console sessions only). */
async function sessionLogin(profile: string, email: string, password: string): Promise<void> {
  const login = await xfer(['auth', 'login', '--url', stack.url, '--profile', profile, '--email', email, '--password-stdin'], { input: `${password}\n` });
  if (login.status !== 0) throw new Error(login.stderr);
}

/** RFC 6238 code (SHA-1, 6 digits, 30 s) of a base32 secret at `atMs`: what an authenticator app shows. */
function totp(base32: string, atMs: number): string {
  const bits = [...base32.replace(/=+$/, '')].map((c) => 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567'.indexOf(c).toString(2).padStart(5, '0')).join('');
  const key = Buffer.from(bits.match(/.{8}/g)!.map((b) => parseInt(b, 2)));
  const counter = Buffer.alloc(8);
  counter.writeBigUInt64BE(BigInt(Math.floor(atMs / 30_000)));
  const mac = createHmac('sha1', key).update(counter).digest();
  return String((mac.readUInt32BE(mac[19]! & 0x0f) & 0x7fffffff) % 1_000_000).padStart(6, '0');
}

/** What this file did, for the activity test. */
const made = { webhook: '', agent: '', user: '' };

beforeAll(async () => {
  cert = makeTestCertificate({ ips: ['127.0.0.1'] });
  receiver = await WebhookReceiver.start(cert);
  stack = await startStack({
    env: process.env,
    serverEnv: { XFER_UNSAFE_WEBHOOK_ALLOW: '127.0.0.1/32', NODE_EXTRA_CA_CERTS: cert.certPath, XFER_WEBHOOK_TIMEOUT_MS: '5000' },
  });
  home = mkdtempSync(join(tmpdir(), 'xfer-cli-admin-'));
  const login = await xfer(['auth', 'login', '--url', stack.url], { input: stack.api.token });
  if (login.status !== 0) throw new Error(login.stderr);
}, 120_000);

afterAll(async () => {
  if (home) rmSync(home, { recursive: true, force: true });
  await stack?.stop();
  await receiver?.stop();
  cert?.remove();
}, 60_000);

test('webhooks: create shows the generated secret once, test sends a correctly signed webhook.test, deliveries, update, delete', async () => {
  const created = await json(['webhooks', 'create', '--webhook-url', receiver.url(HOOK_PATH), '--event', 'transfer.completed', '--event', 'file.uploaded']);
  expect(created).toMatchObject({ url: receiver.url(HOOK_PATH), events: ['transfer.completed', 'file.uploaded'], active: true });
  expect(created.secret).toMatch(/^whsec_/);
  made.webhook = created.id;
  const secret = created.secret as string;
  receiver.secrets.set(HOOK_PATH, secret);

  const { secret: _, ...stored } = created;
  expect(await json(['webhooks', 'get', created.id])).toEqual(stored);
  expect(await stack.api.data('GET', `/webhooks/${created.id}`)).toEqual(stored);
  expect((await json<{ id: string }[]>(['webhooks', 'list', '--all'])).map((w) => w.id)).toContain(created.id);
  const listed = await xfer(['webhooks', 'list']);
  expect(listed.stdout).toMatch(/^ID +URL +EVENTS +ACTIVE +CREATED_AT$/m);
  expect(listed.stdout).not.toContain(secret);

  const tested = await json(['webhooks', 'test', created.id]);
  expect(tested).toMatchObject({ success: true, status_code: 204, error: null });
  const sent = receiver.to(HOOK_PATH);
  expect(sent).toHaveLength(1);
  expect(sent[0]!.headers['x-webhook-event']).toBe('webhook.test');
  expect(sent[0]!.headers['x-webhook-delivery']).toBe(tested.delivery_id);
  expect(sent[0]!.headers['x-webhook-signature']).toBe(createHmac('sha256', secret).update(sent[0]!.body).digest('hex'));
  expect(sent[0]!.verified).toBe(true);

  const deliveries = await json<any[]>(['webhooks', 'deliveries', created.id, '--all']);
  expect(deliveries.find((d) => d.id === tested.delivery_id)).toMatchObject({ event: 'webhook.test', status: 'delivered', attempts: 1 });
  expect(await json(['webhooks', 'deliveries', created.id, '--status', 'failed'])).toEqual([]);
  const table = await xfer(['webhooks', 'deliveries', created.id]);
  expect(table.stdout).toMatch(new RegExp(`^${tested.delivery_id} +webhook\\.test +delivered +1 +204 +-$`, 'm'));

  // A rotated secret signs the next send; a paused webhook keeps its settings.
  const rotated = `rotated-${randomBytes(12).toString('hex')}`;
  const updated = await json(['webhooks', 'update', created.id, '--no-active', '--event', 'transfer.failed', '--secret-stdin'], { input: `${rotated}\n` });
  expect(updated).toMatchObject({ id: created.id, active: false, events: ['transfer.failed'], url: receiver.url(HOOK_PATH) });
  expect(updated).not.toHaveProperty('secret');
  expect(await stack.api.data('GET', `/webhooks/${created.id}`)).toMatchObject({ active: false, events: ['transfer.failed'] });
  receiver.secrets.set(HOOK_PATH, rotated);
  expect(await json(['webhooks', 'test', created.id])).toMatchObject({ success: true });
  expect(receiver.to(HOOK_PATH).at(-1)!.verified).toBe(true);
  expect((await json(['webhooks', 'update', created.id, '--active'])).active).toBe(true);

  // A receiver that refuses is still exit 0, as with connections test: the outcome is in the answer.
  receiver.answer = () => ({ status: 500 });
  const refused = await xfer(['webhooks', 'test', created.id, '--json']);
  receiver.answer = () => ({ status: 204 });
  expect(refused.status).toBe(0);
  expect(JSON.parse(refused.stdout)).toMatchObject({ success: false, status_code: 500 });

  expect(await json(['webhooks', 'delete', created.id])).toEqual({ id: created.id, deleted: true });
  expect((await fails(['webhooks', 'get', created.id])).status).toBe(4);
  expect((await stack.api.call('GET', `/webhooks/${created.id}`)).status).toBe(404);
}, 120_000);

test('webhooks: a private URL is exit 2 with the server message; a given secret is never echoed; bad input exits 2 before any call', async () => {
  const body = { url: 'https://10.0.0.5/hook', events: ['file.uploaded'] };
  const api = await stack.api.call('POST', '/webhooks', body);
  expect(api.status).toBe(400);
  const refused = await fails(['webhooks', 'create', '--webhook-url', body.url, '--event', 'file.uploaded']);
  expect(refused).toEqual({ status: 2, error: api.body.error });
  const human = await xfer(['webhooks', 'create', '--webhook-url', body.url, '--event', 'file.uploaded']);
  expect(human.stderr).toBe(`Error: ${api.body.error}\n`);

  const given = await xfer(['webhooks', 'create', '--webhook-url', receiver.url(`${HOOK_PATH}/given`), '--event', 'file.uploaded', '--secret-stdin'],
    { input: `given-${randomBytes(12).toString('hex')}` });
  expect(given.status).toBe(0);
  expect(given.stdout).not.toMatch(/^secret:/m);
  expect(given.stderr).toBe('');
  const generated = await xfer(['webhooks', 'create', '--webhook-url', receiver.url(`${HOOK_PATH}/gen`), '--event', 'file.uploaded']);
  expect(generated.stdout).toMatch(/^secret: +whsec_/m);
  expect(generated.stderr.trim()).toMatch(/cannot be shown again/);

  const statuses = await Promise.all([
    ['webhooks', 'create', '--webhook-url', receiver.url(HOOK_PATH), '--event', 'no.such.event'],
    ['webhooks', 'create', '--webhook-url', receiver.url(HOOK_PATH), '--event', 'file.uploaded', '--secret-stdin'],
    ['webhooks', 'update', '0123456789abcdef01234567'],
    ['webhooks', 'deliveries', '0123456789abcdef01234567'],
  ].map(async (args) => (await fails(args)).status));
  expect(statuses).toEqual([2, 2, 2, 4]);
}, 60_000);

test('agents: create shows the token once, list shows it offline, a member\'s agent pending until approved, update, test of an offline agent is exit 6 (503 after retries), delete', async () => {
  const name = `cli agent ${run}`;
  const human = await xfer(['agents', 'create', '--name', `${name} human`]);
  expect(human.status).toBe(0);
  expect(human.stdout).toMatch(/^token: +agt_/m);
  expect(human.stderr).toBe('Store this token now: it cannot be shown again.\n');

  const created = await json(['agents', 'create', '--name', name, '--label', 'eu-west', '--label', 'dc=fra1']);
  expect(created).toMatchObject({ name, labels: ['eu-west', 'dc=fra1'], status: 'offline', running_jobs: [] });
  expect(created.token).toMatch(/^agt_/);
  made.agent = created.id;
  const { token: _, ...agent } = created;
  expect(await json(['agents', 'get', created.id])).toEqual(await stack.api.data('GET', `/agents/${created.id}`));
  expect((await json<any[]>(['agents', 'list', '--all'])).find((a) => a.id === created.id)).toEqual(agent);
  const table = await xfer(['agents', 'list', '--limit', '1000']);
  expect(table.stdout).toMatch(new RegExp(`^${created.id} +${name} +offline +yes +eu-west,dc=fra1 +0/0 +- +- +0 +-$`, 'm'));

  // approve: a member's agent is pending (no pools) until an administrator approves it; the member may not (exit 3).
  const member = await newUser('member');
  await sessionLogin('agent-member', member.email, member.password);
  const pending = await json(['agents', 'create', '--name', `${name} pending`, '--label', 'edge', '--profile', 'agent-member']);
  expect(pending).toMatchObject({ approved: false, approved_by: null, pools: [] });
  expect((await xfer(['agents', 'list', '--limit', '1000'])).stdout).toMatch(new RegExp(`^${pending.id} +${name} pending +offline +pending +(- +)?0/0 `, 'm'));
  const refused = await fails(['agents', 'approve', pending.id, '--profile', 'agent-member']);
  expect(refused).toEqual({ status: 3, error: 'Approving an agent needs an administrator (an owner or admin session, or a key holding every scope): your role (member) is neither owner nor admin' });
  expect(await json(['agents', 'approve', pending.id])).toMatchObject({ id: pending.id, approved: true, approved_by: { type: 'api_key' }, pools: ['edge'] });

  // update: only the flags given; --label replaces the account's labels; --clear-* sends null / [].
  expect(await json(['agents', 'update', created.id, '--max-jobs', '2', '--label', 'gpu'])).toMatchObject({ id: created.id, max_jobs: 2, labels: ['gpu'], pools: ['gpu'] });
  expect(await json(['agents', 'update', created.id, '--clear-max-jobs', '--clear-labels'])).toMatchObject({ max_jobs: null, labels: [], pools: [] });
  expect((await fails(['agents', 'update', created.id])).status).toBe(2);
  expect((await fails(['agents', 'update', created.id, '--name', `${name} human`])).status).toBe(5);

  const api = await stack.api.call('POST', `/agents/${created.id}/test`);
  expect(api.status).toBe(503);
  expect(await fails(['agents', 'test', created.id])).toEqual({ status: 6, error: api.body.error });

  expect(await json(['agents', 'delete', created.id])).toEqual({ id: created.id, deleted: true });
  expect((await fails(['agents', 'get', created.id])).status).toBe(4);
  expect((await fails(['agents', 'test', created.id])).status).toBe(4);
}, 120_000);

test('users: create with the password from stdin, duplicate email exit 5, update, delete; a member is refused with exit 3', async () => {
  const email = `cli-user-${run}@example.test`;
  const password = randomBytes(12).toString('hex');
  const created = await json(['users', 'create', '--email', email, '--role', 'member', '--name', 'CLI User', '--password-stdin'], { input: `${password}\n` });
  expect(created).toMatchObject({ email, role: 'member', name: 'CLI User', last_login_at: null });
  made.user = created.id;
  // The password piped in is the one stored: the user can log in with it.
  expect((await fetch(`${stack.url}/auth/login`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email, password }),
  })).status).toBe(200);

  const dup = await stack.api.call('POST', '/users', { email, role: 'viewer', password });
  expect(dup.status).toBe(409);
  expect(await fails(['users', 'create', '--email', email, '--role', 'viewer', '--password-stdin'], { input: password })).toEqual({ status: 5, error: dup.body.error });
  const usage = await Promise.all([
    fails(['users', 'create', '--email', `x-${email}`, '--role', 'viewer', '--password-stdin']),
    fails(['users', 'create', '--email', `x-${email}`, '--role', 'emperor', '--password-stdin'], { input: password }),
  ]);
  expect(usage.map((u) => u.status)).toEqual([2, 2]);

  await sessionLogin('member', email, password);
  const other = `cli-other-${run}@example.test`;
  expect((await fails(['users', 'create', '--email', other, '--role', 'viewer', '--password-stdin', '--profile', 'member'], { input: password })).status).toBe(3);
  expect((await stack.api.data<{ email: string }[]>('GET', '/users?limit=1000')).map((u) => u.email)).not.toContain(other);

  expect(await json(['users', 'update', created.id, '--role', 'viewer', '--name', 'Renamed'])).toMatchObject({ id: created.id, role: 'viewer', name: 'Renamed' });
  expect(await json(['users', 'get', created.id])).toEqual(await stack.api.data('GET', `/users/${created.id}`));
  expect(await stack.api.data('GET', `/users/${created.id}`)).toMatchObject({ role: 'viewer', name: 'Renamed' });
  expect((await json<{ id: string }[]>(['users', 'list', '--all'])).map((u) => u.id)).toContain(created.id);

  expect(await json(['users', 'delete', created.id])).toEqual({ id: created.id, deleted: true });
  expect((await fails(['users', 'get', created.id])).status).toBe(4);
  expect((await stack.api.call('GET', `/users/${created.id}`)).status).toBe(404);
}, 60_000);

test('activity list shows the events caused above, with the filters as flags', async () => {
  expect(made.webhook && made.agent && made.user).toBeTruthy();
  const hook = await json<any[]>(['activity', 'list', '--resource-type', 'webhook', '--resource-id', made.webhook, '--all']);
  expect(hook.map((e) => e.action).sort()).toEqual(['webhook.create', 'webhook.delete', 'webhook.test', 'webhook.test', 'webhook.test',
    'webhook.update', 'webhook.update']);
  expect(hook.every((e) => e.actor.type === 'api_key')).toBe(true);

  const agents = await json<any[]>(['activity', 'list', '--action', 'agent.revoke', '--all']);
  expect(agents.map((e) => e.resource.id)).toEqual([made.agent]);
  const users = await json<any[]>(['activity', 'list', '--resource-type', 'user', '--resource-id', made.user, '--all']);
  expect(users.map((e) => e.action).sort()).toEqual(['user.create', 'user.delete', 'user.update']);
  const byUsers = await json<any[]>(['activity', 'list', '--actor-type', 'user', '--since', new Date(Date.now() - 3_600_000).toISOString(), '--all']);
  expect(byUsers.length).toBeGreaterThan(0);
  expect(byUsers.every((e) => e.actor.type === 'user')).toBe(true);
  expect(await json(['activity', 'list', '--action', 'webhook.create', '--until', '2000-01-01T00:00:00Z'])).toEqual([]);

  const table = await xfer(['activity', 'list', '--resource-id', made.user]);
  expect(table.stdout).toMatch(/^TIME +ACTOR +ACTION +RESOURCE +OUTCOME$/m);
  expect(table.stdout).toMatch(new RegExp(`^\\S+ +api_key:\\S+ +user\\.delete +user:${made.user} +success$`, 'm'));
  expect((await fails(['activity', 'list', '--since', 'yesterday'])).status).toBe(2);
}, 60_000);

test('settings with a session login: mfa, sessions, login events, retention, test status; an API key gets exit 3', async () => {
  const admin = await newUser('admin');
  await sessionLogin('console', admin.email, admin.password);
  const as = ['--profile', 'console'];

  expect(await json(['settings', 'mfa', 'show', ...as])).toEqual({ enabled: false, pending: false });
  const sessions = await json(['settings', 'sessions', 'show', ...as]);
  expect(Date.parse(sessions.current_session_expires_at)).toBeGreaterThan(Date.now());
  expect(sessions.session_ttl_seconds).toBeGreaterThan(0);
  const logins = await json<any[]>(['settings', 'login-events', '--all', ...as]);
  expect(logins.length).toBeGreaterThan(0);
  expect(logins.every((e) => e.actor.type === 'user' && e.actor.id === admin.id)).toBe(true);
  expect(await json(['settings', 'login-events', '--limit', '1', ...as])).toHaveLength(1);

  const before = await json(['settings', 'retention', 'show', ...as]);
  expect(before).toMatchObject({ audit_days: 365, deleted_files_days: 30 });
  expect(await json(['settings', 'retention', 'update', '--audit-days', '400', ...as])).toMatchObject({ audit_days: 400, deleted_files_days: 30 });
  expect(await json(['settings', 'retention', 'show', ...as])).toMatchObject({ audit_days: 400, deleted_files_days: 30, updated_at: expect.any(String) });
  expect((await fails(['settings', 'retention', 'update', '--audit-days', '5', ...as])).status).toBe(2);
  expect((await fails(['settings', 'retention', 'update', ...as])).status).toBe(2);

  expect(await json(['settings', 'service-principals', 'update', '--principal', 'Nightly ETL=0oa1b2', '--principal', 'a=b=c', ...as]))
    .toMatchObject({ service_principals: [{ name: 'Nightly ETL', client_id: '0oa1b2' }, { name: 'a=b', client_id: 'c' }] });
  expect((await json(['settings', 'service-principals', 'show', ...as])).service_principals).toHaveLength(2);
  expect((await json(['settings', 'service-principals', 'update', '--clear', ...as])).service_principals).toEqual([]);
  expect(await json(['settings', 'avatar', 'update', '--avatar-url', 'https://example.com/me.png', ...as])).toMatchObject({ url: 'https://example.com/me.png' });
  expect(await json(['settings', 'avatar', 'update', '--clear', ...as])).toMatchObject({ url: null });
  expect(await json(['settings', 'test-status', ...as])).toMatchObject({ status: 'ok', database: 'ok' });

  // MFA: the enrolment secret is shown once (with the next step on stderr), a first code turns it on, a later one off.
  const enrol = await xfer(['settings', 'mfa', 'update', '--enable', ...as]);
  expect(enrol.status).toBe(0);
  const secret = /^secret: +([A-Z2-7]+)$/m.exec(enrol.stdout)![1]!;
  expect(enrol.stdout).toMatch(/^otpauth_url: +otpauth:\/\/totp\//m);
  expect(enrol.stderr).toMatch(/^Add the secret .*xfer settings mfa verify --code <code>\n$/);
  expect(await json(['settings', 'mfa', 'show', ...as])).toEqual({ enabled: false, pending: true });
  const wrong = totp(secret, Date.now()) === '000000' ? '111111' : '000000';
  expect((await fails(['settings', 'mfa', 'verify', '--code', wrong, ...as])).status).toBe(2);
  expect(await json(['settings', 'mfa', 'verify', '--code', totp(secret, Date.now()), ...as])).toEqual({ enabled: true, pending: false });
  expect((await fails(['settings', 'mfa', 'update', '--enable', '--disable', ...as])).status).toBe(2);
  expect((await fails(['settings', 'mfa', 'update', ...as])).status).toBe(2);
  // A code is single-use: turning MFA off takes the next step's code (accepted within the ±1 step window).
  expect(await json(['settings', 'mfa', 'update', '--disable', '--code', totp(secret, Date.now() + 30_000), ...as])).toEqual({ enabled: false, pending: false });

  const withKey = [['settings', 'mfa', 'show'], ['settings', 'sessions', 'show'], ['settings', 'login-events'], ['settings', 'retention', 'show']];
  const refused = await Promise.all(withKey.map(async (args) => ({ args, status: (await fails(args)).status })));
  expect(refused).toEqual(withKey.map((args) => ({ args, status: 3 })));

  // Signing out everywhere ends the session the CLI holds, too.
  expect(await json(['settings', 'sessions', 'revoke', ...as])).toMatchObject({ id: admin.id, deleted: true });
  expect((await fails(['settings', 'mfa', 'show', ...as])).status).toBe(3);
}, 150_000);

test('health needs no credentials: ok is exit 0; no URL is exit 2', async () => {
  const bare = mkdtempSync(join(tmpdir(), 'xfer-cli-bare-'));
  try {
    const env = { HOME: bare, XDG_CONFIG_HOME: bare };
    const ok = await xfer(['health', '--json'], { env: { ...env, XFER_URL: stack.url } });
    expect(ok.status).toBe(0);
    expect(JSON.parse(ok.stdout)).toEqual({ status: 'ok' });
    expect((await xfer(['health', '--url', stack.url], { env })).stdout).toBe('status: ok\n');
    expect((await fails(['health'], { env })).status).toBe(2);
  } finally {
    rmSync(bare, { recursive: true, force: true });
  }
}, 60_000);
