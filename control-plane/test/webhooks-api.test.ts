import { randomBytes } from 'node:crypto';
import { lookup } from 'node:dns/promises';
import { hostname } from 'node:os';
import { Types } from 'mongoose';
import { buildApp, type App } from '../src/app.js';
import { Messages, WEBHOOK_EVENT_TYPES } from '@xfer/shared';
import { auth, buildTestApp, createAccount, createKey, expectError, type TestAccount } from './helper.js';
import { boundTo } from '../src/lib/sealed-fields.js';

let app: App;
let owner: TestAccount;

beforeAll(async () => {
  app = await buildTestApp();
  owner = await createAccount(app);
});
afterAll(() => app.close());

// Public IP literals: accepted without DNS (this machine may have none).
const URL_OK = 'https://8.8.8.8:8443/hooks/xfer?tenant=1';
const URL_OK_2 = 'https://[2606:4700:4700::1111]/in';

const post = (token: string, payload: unknown, a: App = app) =>
  a.inject({ method: 'POST', url: '/api/v1/webhooks', headers: auth(token), payload: payload as Record<string, unknown> });
const put = (token: string, id: string, payload: unknown) =>
  app.inject({ method: 'PUT', url: `/api/v1/webhooks/${id}`, headers: auth(token), payload: payload as Record<string, unknown> });
const get = (token: string, path = '') => app.inject({ method: 'GET', url: `/api/v1/webhooks${path}`, headers: auth(token) });
const del = (token: string, id: string) => app.inject({ method: 'DELETE', url: `/api/v1/webhooks/${id}`, headers: auth(token) });

const raw = (id: string) => app.dbConnection.collection('webhooks').findOne({ _id: new Types.ObjectId(id) });
const auditOf = (id: string) => app.dbConnection.collection('audit_events').find({ 'resource.id': id }).sort({ _id: 1 }).toArray();
const countOf = (account: TestAccount) => app.db.webhooks.countDocuments({ account_id: account.accountId });

async function created(token = owner.apiKey, payload: Record<string, unknown> = { url: URL_OK, events: ['file.uploaded'] }) {
  const res = await post(token, payload);
  if (res.statusCode !== 201) throw new Error(`create webhook: ${res.statusCode} ${res.body}`);
  return res.json().data as { id: string; url: string; events: string[]; active: boolean; created_at: string; updated_at: string; secret?: string };
}

describe('POST /webhooks', () => {
  test('generates a whsec_ secret, shows it once with a warning, stores it sealed only', async () => {
    const res = await post(owner.apiKey, { url: URL_OK, events: ['file.uploaded', 'transfer.completed'] });
    expect(res.statusCode).toBe(201);
    const body = res.json();
    expect(body.warning).toBe(Messages.webhookSecretWarning);
    expect(Object.keys(body.data).sort()).toEqual(['active', 'created_at', 'events', 'id', 'secret', 'updated_at', 'url']);
    expect(body.data).toMatchObject({ url: URL_OK, events: ['file.uploaded', 'transfer.completed'], active: true });
    const secret = body.data.secret as string;
    expect(secret).toMatch(/^whsec_[A-Za-z0-9_-]{43}$/);
    expect(Buffer.from(secret.slice(6), 'base64url')).toHaveLength(32);

    const stored = await raw(body.data.id);
    expect(Object.keys(stored!.secret).sort()).toEqual(['data', 'iv', 'kid', 'tag', 'v']);
    expect(JSON.stringify(stored)).not.toContain(secret);
    expect(JSON.stringify(stored)).not.toContain(secret.slice(6));
    expect(app.vault.open(stored!.secret as never, boundTo('webhook.secret', stored!))).toBe(secret);

    // Never again: not on read, not in the list, not in the audit trail.
    expect((await get(owner.apiKey, `/${body.data.id}`)).body).not.toContain(secret);
    expect((await get(owner.apiKey)).body).not.toContain(secret);
    const audit = await auditOf(body.data.id);
    expect(audit.map((a) => a.action)).toEqual(['webhook.create']);
    expect(audit[0]!.details).toEqual({ origin: 'https://8.8.8.8:8443', events: ['file.uploaded', 'transfer.completed'], active: true, secret_source: 'generated' });
    expect(JSON.stringify(audit)).not.toContain(secret.slice(6));
  });

  test('a given secret is stored sealed and never echoed', async () => {
    const secret = `my-own-secret-${randomBytes(8).toString('hex')}`;
    const res = await post(owner.apiKey, { url: URL_OK, events: ['file.deleted'], secret });
    expect(res.statusCode).toBe(201);
    expect(res.body).not.toContain(secret);
    expect(res.json().warning).toBeUndefined();
    expect(Object.keys(res.json().data)).not.toContain('secret');
    const stored = await raw(res.json().data.id);
    expect(JSON.stringify(stored)).not.toContain(secret);
    expect(app.vault.open(stored!.secret as never, boundTo('webhook.secret', stored!))).toBe(secret);
    const audit = await auditOf(res.json().data.id);
    expect(audit[0]!.details).toMatchObject({ secret_source: 'given' });
    expect(JSON.stringify(audit)).not.toContain(secret);
  });

  test('every event type of api.md "Events" can be subscribed to', async () => {
    const hook = await created(owner.apiKey, { url: URL_OK, events: [...WEBHOOK_EVENT_TYPES] });
    expect(hook.events).toEqual([...WEBHOOK_EVENT_TYPES]);
  });

  test('the URL is stored in the normalized form the guard checked', async () => {
    const hook = await created(owner.apiKey, { url: 'HTTPS://[2606:4700:4700:0:0:0:0:1111]:443/in', events: ['file.shared'] });
    expect(hook.url).toBe(URL_OK_2);
    expect((await raw(hook.id))!.url).toBe(URL_OK_2);
  });
});

describe('SSRF refusals through the API (the full table is lib/ssrf-guard.test.ts)', () => {
  const REFUSED: Array<[string, RegExp]> = [
    ['http://8.8.8.8/hook', /^url must use https \(got http:\)$/],
    ['https://127.0.0.1/hook', /^url host 127\.0\.0\.1 is a loopback address$/],
    ['https://2130706433/hook', /127\.0\.0\.1 is a loopback address/],
    ['https://0x7f000001/hook', /127\.0\.0\.1 is a loopback address/],
    ['https://0177.0.0.1/hook', /127\.0\.0\.1 is a loopback address/],
    ['https://[::ffff:127.0.0.1]/hook', /IPv4-mapped form of 127\.0\.0\.1, a loopback address/],
    ['https://[::1]/hook', /::1 is a loopback address/],
    ['https://localhost/hook', /^url host localhost is a loopback name$/],
    ['https://LocalHost./hook', /localhost is a loopback name/],
    ['https://169.254.169.254/latest/meta-data/', /cloud metadata address/],
    ['https://[fd00:ec2::254]/latest', /cloud metadata address/],
    ['https://10.0.0.1/hook', /private address/],
    ['https://100.64.0.1/hook', /carrier-grade NAT/],
    ['https://[fe80::1]/hook', /link-local/],
    ['https://[fd12::1]/hook', /unique-local/],
    ['https://224.0.0.1/hook', /multicast/],
    ['https://0.0.0.0/hook', /unspecified/],
    ['https://user:pw@8.8.8.8/hook', /^url must not contain credentials/],
    ['not a url', /^url is not a valid absolute URL$/],
    ['https://nonexistent.invalid/hook', /^url host nonexistent\.invalid could not be resolved/],
  ];
  test.each(REFUSED)('%s → 400, nothing stored', async (url, reason) => {
    const acct = await createAccount(app);
    expectError(await post(acct.apiKey, { url, events: ['file.uploaded'] }), 400, reason);
    expect(await countOf(acct)).toBe(0);
  });

  test('a host name resolving to a local address is refused (this machine\'s own name, through the system resolver)', async () => {
    const name = hostname();
    // Precondition: the machine's name resolves offline (/etc/hosts or nss-myhostname), to a loopback or private address.
    const addresses = await lookup(name, { all: true });
    expect(addresses.length).toBeGreaterThan(0);
    const acct = await createAccount(app);
    expectError(
      await post(acct.apiKey, { url: `https://${name}:8443/hook`, events: ['file.uploaded'] }), 400,
      new RegExp(`^url host ${name.toLowerCase().replace(/\./g, '\\.')} resolves to a refused address: .* is (a loopback|a private|a link-local|a unique-local)`),
    );
    expect(await countOf(acct)).toBe(0);
  });
});

describe('bad input is 400 {error} and stores nothing', () => {
  const long = `https://8.8.8.8/${'a'.repeat(2048)}`;
  const CASES: Array<[string, unknown, RegExp]> = [
    ['no url', { events: ['file.uploaded'] }, /^body\.url is required$/],
    ['no events', { url: URL_OK }, /^body\.events is required$/],
    ['empty url', { url: '', events: ['file.uploaded'] }, /^body\.url must not be empty$/],
    ['url not a string', { url: 42, events: ['file.uploaded'] }, /^body\.url must be string$/],
    ['url too long', { url: long, events: ['file.uploaded'] }, /^body\.url must NOT have more than 2048 characters$/],
    ['empty events', { url: URL_OK, events: [] }, /^body\.events must NOT have fewer than 1 items$/],
    ['events not an array', { url: URL_OK, events: 'file.uploaded' }, /^body\.events must be array$/],
    ['duplicate events', { url: URL_OK, events: ['file.uploaded', 'file.uploaded'] }, /^body\.events must NOT have duplicate items/],
    ['unknown event', { url: URL_OK, events: ['file.uploaded', 'file.exploded'] }, /^events contains unknown event type: file\.exploded$/],
    ['secret too short', { url: URL_OK, events: ['file.uploaded'], secret: 'a'.repeat(15) }, /^body\.secret must NOT have fewer than 16 characters$/],
    ['secret too long', { url: URL_OK, events: ['file.uploaded'], secret: 'a'.repeat(257) }, /^body\.secret must NOT have more than 256 characters$/],
    ['secret with a space', { url: URL_OK, events: ['file.uploaded'], secret: 'sixteen chars ok!' }, /^secret must be visible ASCII/],
    ['secret not ASCII', { url: URL_OK, events: ['file.uploaded'], secret: 'geheimnis-äöü-1234' }, /^secret must be visible ASCII/],
    ['unknown field', { url: URL_OK, events: ['file.uploaded'], active: false }, /^body has unknown field 'active'$/],
  ];
  test.each(CASES)('POST with %s', async (_name, payload, message) => {
    const acct = await createAccount(app);
    expectError(await post(acct.apiKey, payload), 400, message);
    expect(await countOf(acct)).toBe(0);
  });

  test('POST with a body that is not JSON', async () => {
    const res = await app.inject({
      method: 'POST', url: '/api/v1/webhooks', headers: { ...auth(owner.apiKey), 'content-type': 'application/json' }, payload: '{"url": ',
    });
    expectError(res, 400, 'Request body is not valid JSON');
  });

  test('list with an unknown query parameter or a foreign cursor', async () => {
    expectError(await get(owner.apiKey, '?active=true'), 400, /unknown field 'active'/);
    expectError(await get(owner.apiKey, '?cursor=bm90LWEtY3Vyc29y'), 400, /cursor/);
    expectError(await get(owner.apiKey, '?limit=0'), 400, /limit/);
  });
});

describe('GET /webhooks', () => {
  test('pages the account\'s webhooks newest first, never another account\'s', async () => {
    const acct = await createAccount(app);
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await created(acct.apiKey)).id);
    await created(owner.apiKey);
    const page1 = (await get(acct.apiKey, '?limit=2')).json();
    expect(page1.data.map((w: { id: string }) => w.id)).toEqual([ids[2], ids[1]]);
    const page2 = (await get(acct.apiKey, `?limit=2&cursor=${page1.next_cursor}`)).json();
    expect(page2).toEqual({ data: [expect.objectContaining({ id: ids[0], url: URL_OK, active: true })], next_cursor: null });
    expect(JSON.stringify([page1, page2])).not.toMatch(/secret/);
  });

  test('GET /webhooks/:id answers the webhook; unknown and malformed ids are 404', async () => {
    const hook = await created();
    const res = await get(owner.apiKey, `/${hook.id}`);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ data: { id: hook.id, url: URL_OK, events: ['file.uploaded'], active: true, created_at: hook.created_at, updated_at: hook.updated_at } });
    expectError(await get(owner.apiKey, `/${new Types.ObjectId()}`), 404, /^Webhook [0-9a-f]{24} not found$/);
    expectError(await get(owner.apiKey, '/not-an-id'), 404, 'Webhook not-an-id not found');
  });
});

describe('PUT /webhooks/:id', () => {
  test('changes url, events and active; the result is read back and audited without the secret', async () => {
    const hook = await created();
    const res = await put(owner.apiKey, hook.id, { url: URL_OK_2, events: ['transfer.failed', 'file.scan_blocked'], active: false });
    expect(res.statusCode).toBe(200);
    const data = res.json().data;
    expect(data).toMatchObject({ id: hook.id, url: URL_OK_2, events: ['transfer.failed', 'file.scan_blocked'], active: false, created_at: hook.created_at });
    expect(Date.parse(data.updated_at)).toBeGreaterThanOrEqual(Date.parse(hook.updated_at));
    expect(Object.keys(data)).not.toContain('secret');
    expect((await get(owner.apiKey, `/${hook.id}`)).json().data).toEqual(data);
    const audit = await auditOf(hook.id);
    expect(audit.map((a) => a.action)).toEqual(['webhook.create', 'webhook.update']);
    expect(audit[1]!.details).toEqual({ origin: 'https://[2606:4700:4700::1111]', events: data.events, active: false, changed: ['active', 'events', 'url'] });
  });

  test('a new url is checked again: refused urls change nothing', async () => {
    const hook = await created();
    expectError(await put(owner.apiKey, hook.id, { url: 'https://192.168.1.10/hook', active: false }), 400, /^url host 192\.168\.1\.10 is a private address$/);
    expectError(await put(owner.apiKey, hook.id, { url: 'http://8.8.8.8/hook' }), 400, /must use https/);
    expect(await raw(hook.id)).toMatchObject({ url: URL_OK, active: true });
  });

  test('a new secret replaces the signing secret and is not echoed', async () => {
    const hook = await created();
    const before = await raw(hook.id);
    const secret = `rotated-${randomBytes(12).toString('hex')}`;
    const res = await put(owner.apiKey, hook.id, { secret });
    expect(res.statusCode).toBe(200);
    expect(res.body).not.toContain(secret);
    const after = await raw(hook.id);
    expect(app.vault.open(after!.secret as never, boundTo('webhook.secret', after!))).toBe(secret);
    expect(after!.secret).not.toEqual(before!.secret);
    expect((await auditOf(hook.id))[1]!.details).toMatchObject({ changed: ['secret'] });
    expect(JSON.stringify(await auditOf(hook.id))).not.toContain(secret);
  });

  test('bad updates are 400 and change nothing', async () => {
    const hook = await created();
    expectError(await put(owner.apiKey, hook.id, {}), 400, 'body must contain at least one of url, events, active, secret');
    expectError(await put(owner.apiKey, hook.id, { active: 'no' }), 400, /^body\.active must be boolean$/);
    expectError(await put(owner.apiKey, hook.id, { events: [] }), 400, /^body\.events must NOT have fewer than 1 items$/);
    expectError(await put(owner.apiKey, hook.id, { events: ['user.logout'] }), 400, 'events contains unknown event type: user.logout');
    expectError(await put(owner.apiKey, hook.id, { secret: 'short' }), 400, /body\.secret/);
    expectError(await put(owner.apiKey, hook.id, { account_id: new Types.ObjectId().toHexString() }), 400, "body has unknown field 'account_id'");
    const stored = await raw(hook.id);
    expect(stored).toMatchObject({ url: URL_OK, events: ['file.uploaded'], active: true });
    expect(stored!.updated_at.toISOString()).toBe(hook.updated_at);
  });
});

describe('DELETE /webhooks/:id', () => {
  test('deletes, audits, and the webhook is gone', async () => {
    const hook = await created();
    const res = await del(owner.apiKey, hook.id);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ data: { id: hook.id, deleted: true } });
    expect(await raw(hook.id)).toBeNull();
    expectError(await get(owner.apiKey, `/${hook.id}`), 404);
    expectError(await del(owner.apiKey, hook.id), 404);
    expect((await auditOf(hook.id)).map((a) => a.action)).toEqual(['webhook.create', 'webhook.delete']);
  });
});

describe('access', () => {
  test('the free plan gets 403 on every webhook route', async () => {
    const free = await createAccount(app, 'free');
    const id = String(new Types.ObjectId());
    for (const res of [
      await get(free.apiKey), await get(free.apiKey, `/${id}`), await post(free.apiKey, { url: URL_OK, events: ['file.uploaded'] }),
      await put(free.apiKey, id, { active: false }), await del(free.apiKey, id),
    ]) expectError(res, 403, Messages.planRequired);
    expect(await countOf(free)).toBe(0);
  });

  test('webhooks:read lists and reads; webhooks:write creates, changes and deletes', async () => {
    const hook = await created();
    const reader = await createKey(app, owner.apiKey, ['webhooks:read']);
    const writer = await createKey(app, owner.apiKey, ['webhooks:write', 'files:read']); // files:read: its webhooks carry file.uploaded
    expect((await get(reader)).statusCode).toBe(200);
    expect((await get(reader, `/${hook.id}`)).statusCode).toBe(200);
    expectError(await post(reader, { url: URL_OK, events: ['file.uploaded'] }), 403, Messages.missingScope);
    expectError(await put(reader, hook.id, { active: false }), 403, Messages.missingScope);
    expectError(await del(reader, hook.id), 403, Messages.missingScope);
    expectError(await get(writer), 403, Messages.missingScope);
    expectError(await get(writer, `/${hook.id}`), 403, Messages.missingScope);
    const mine = await created(writer);
    expect((await put(writer, mine.id, { active: false })).statusCode).toBe(200);
    expect((await del(writer, mine.id)).statusCode).toBe(200);
    expect(await raw(hook.id)).toMatchObject({ active: true });
  });

  test("another account's webhook ids are 404 on read, update and delete, and stay untouched", async () => {
    const hook = await created();
    const stranger = await createAccount(app);
    expectError(await get(stranger.apiKey, `/${hook.id}`), 404, `Webhook ${hook.id} not found`);
    expectError(await put(stranger.apiKey, hook.id, { active: false, url: 'https://10.0.0.1/' }), 404, `Webhook ${hook.id} not found`);
    expectError(await del(stranger.apiKey, hook.id), 404, `Webhook ${hook.id} not found`);
    expect((await get(stranger.apiKey)).json().data).toEqual([]);
    expect(await raw(hook.id)).toMatchObject({ url: URL_OK, active: true });
  });
});

describe('the test-only allow-list (XFER_UNSAFE_WEBHOOK_ALLOW)', () => {
  test('opens exactly the listed address, and nothing else', async () => {
    const open = await buildTestApp({ webhooks: { ...app.config.webhooks, unsafeAllowedAddresses: ['127.0.0.1/32'] } });
    try {
      const acct = await createAccount(open);
      const res = await post(acct.apiKey, { url: 'https://127.0.0.1:8443/receiver', events: ['file.uploaded'] }, open);
      expect(res.statusCode).toBe(201);
      expect(res.json().data.url).toBe('https://127.0.0.1:8443/receiver');
      expectError(await post(acct.apiKey, { url: 'https://127.0.0.2:8443/receiver', events: ['file.uploaded'] }, open), 400, /loopback address/);
      expectError(await post(acct.apiKey, { url: 'https://[::1]:8443/receiver', events: ['file.uploaded'] }, open), 400, /loopback address/);
      expectError(await post(acct.apiKey, { url: 'https://localhost:8443/receiver', events: ['file.uploaded'] }, open), 400, /loopback name/);
      expectError(await post(acct.apiKey, { url: 'http://127.0.0.1:8443/receiver', events: ['file.uploaded'] }, open), 400, /must use https/);
    } finally {
      await open.close();
    }
    // The default app (empty list) still refuses it.
    expectError(await post(owner.apiKey, { url: 'https://127.0.0.1:8443/receiver', events: ['file.uploaded'] }), 400, /loopback address/);
  });

  test('a start with the allow-list set logs one warn line naming it unsafe; a start without logs none', async () => {
    const startLog = async (unsafeAllowedAddresses: string[]) => {
      const lines: string[] = [];
      // Shares the suite's database (no drop on close): only the start matters here.
      const other = await buildApp(
        { ...app.config, webhooks: { ...app.config.webhooks, unsafeAllowedAddresses } },
        { logger: { level: 'warn', stream: { write: (line: string) => lines.push(line) } } },
      );
      await other.ready();
      await other.close();
      return lines.map((l) => JSON.parse(l) as { level: number; msg: string; unsafeAllowedAddresses?: string[] }).filter((l) => /XFER_UNSAFE_WEBHOOK_ALLOW/.test(l.msg));
    };
    const warned = await startLog(['127.0.0.1/32', '::1']);
    expect(warned).toHaveLength(1);
    expect(warned[0]).toMatchObject({ level: 40, unsafeAllowedAddresses: ['127.0.0.1/32', '::1'], msg: expect.stringMatching(/^UNSAFE: /) });
    expect(await startLog([])).toEqual([]);
  });
});
