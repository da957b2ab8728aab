import { Types } from 'mongoose';
import type { App } from '../src/app.js';
import { auth, buildTestApp, createAccount, createKey, expectError, type TestAccount } from './helper.js';
import { makeConnection, uniqueName } from './fixtures.js';
import { boundTo } from '../src/lib/sealed-fields.js';

/** The parameters API (docs/automation.md "Global parameters and templates") and templates in POST /transfers. */
let app: App;
let owner: TestAccount;
let stranger: TestAccount;

beforeAll(async () => {
  app = await buildTestApp();
  owner = await createAccount(app);
  stranger = await createAccount(app);
});
afterAll(() => app.close());

const post = (payload: Record<string, unknown>, token = owner.apiKey) =>
  app.inject({ method: 'POST', url: '/api/v1/parameters', headers: auth(token), payload });
const put = (id: string, payload: Record<string, unknown>, token = owner.apiKey) =>
  app.inject({ method: 'PUT', url: `/api/v1/parameters/${id}`, headers: auth(token), payload });
const get = (path = '', token = owner.apiKey) => app.inject({ method: 'GET', url: `/api/v1/parameters${path}`, headers: auth(token) });
const del = (id: string, token = owner.apiKey) => app.inject({ method: 'DELETE', url: `/api/v1/parameters/${id}`, headers: auth(token) });
const raw = (id: string) => app.dbConnection.collection('parameters').findOne({ _id: new Types.ObjectId(id) });
const auditOf = (id: string) => app.dbConnection.collection('audit_events').find({ 'resource.id': id }).sort({ _id: 1 }).toArray();

/** A fresh valid parameter name (names are unique per account). */
let seq = 0;
const freshName = (prefix = 'p') => `${prefix}_${++seq}_${new Types.ObjectId().toHexString().slice(-8)}`;

async function created(payload: Record<string, unknown>, token = owner.apiKey) {
  const res = await post(payload, token);
  if (res.statusCode !== 201) throw new Error(`create parameter: ${res.statusCode} ${res.body}`);
  return res.json().data as { id: string; name: string; value: string | null; secret: boolean; has_value: boolean; description: string | null };
}

const FIELDS = ['created_at', 'description', 'has_value', 'id', 'name', 'secret', 'updated_at', 'value'];

describe('POST /parameters', () => {
  test('a plain parameter is stored and shown as given', async () => {
    const name = freshName('region');
    const res = await post({ name, value: 'eu-west', description: 'where reports go' });
    expect(res.statusCode).toBe(201);
    const { data } = res.json();
    expect(Object.keys(data).sort()).toEqual(FIELDS);
    expect(data).toMatchObject({ name, value: 'eu-west', secret: false, has_value: true, description: 'where reports go' });
    expect((await get(`/${data.id}`)).json().data).toEqual(data);
    const audit = await auditOf(data.id);
    expect(audit.map((a) => [a.action, a.outcome])).toEqual([['parameter.create', 'success']]);
    expect(audit[0]!.details).toEqual({ name, secret: false });
  });

  test('a secret value is sealed bound to its record and never returned, listed or audited', async () => {
    const name = freshName('token');
    const value = `sekrit-${new Types.ObjectId()}`;
    const res = await post({ name, value, secret: true });
    expect(res.statusCode).toBe(201);
    expect(res.body).not.toContain(value);
    const { data } = res.json();
    expect(data).toMatchObject({ name, value: null, secret: true, has_value: true, description: null });

    const stored = await raw(data.id);
    expect(stored!.value).toBeNull();
    expect(JSON.stringify(stored)).not.toContain(value);
    expect(app.vault.open(stored!.secret_value as never, boundTo('parameter.value', stored!))).toBe(value);

    expect((await get(`/${data.id}`)).body).not.toContain(value);
    expect((await get('?limit=1000')).body).not.toContain(value);
    const audit = await auditOf(data.id);
    expect(audit[0]!.details).toEqual({ name, secret: true });
    expect(JSON.stringify(audit)).not.toContain(value);
  });

  test.each([
    ['1abc'], ['with-dash'], ['has space'], ['ünïcode'], ['a'.repeat(65)], [''],
  ])('name %j is a 400 naming name', async (name) => {
    expectError(await post({ name, value: 'x' }), 400, /name/);
  });

  test('the name rule is the documented one', async () => {
    expectError(await post({ name: 'bad-name', value: 'x' }), 400, 'name must start with a letter or _ and hold only letters, digits and _ (at most 64 characters)');
    expect((await post({ name: `_${'a'.repeat(63)}`, value: 'x' })).statusCode).toBe(201);
  });

  test('missing or wrong fields are 400s naming them, unknown fields too', async () => {
    expectError(await post({ name: freshName() }), 400, /value/);
    expectError(await post({ value: 'x' }), 400, /name/);
    expectError(await post({ name: freshName(), value: 'x', secret: 'yes' }), 400, /secret/);
    expectError(await post({ name: freshName(), value: 'x'.repeat(4097) }), 400, /value/);
    expectError(await post({ name: freshName(), value: 'x', extra: 1 }), 400, /extra|additional/);
  });

  test('a taken name is a 409 naming name; another account may use it', async () => {
    const name = freshName('dup');
    await created({ name, value: 'a' });
    expectError(await post({ name, value: 'b' }), 409, `name: a parameter named '${name}' already exists`);
    expect((await post({ name, value: 'c' }, stranger.apiKey)).statusCode).toBe(201);
  });

  test('concurrent creates of one name: exactly one wins (the unique index decides)', async () => {
    const name = freshName('race');
    const results = await Promise.all(Array.from({ length: 6 }, (_, i) => post({ name, value: String(i) })));
    expect(results.map((r) => r.statusCode).sort()).toEqual([201, 409, 409, 409, 409, 409]);
    expect(await app.db.parameters.countDocuments({ account_id: owner.accountId, name })).toBe(1);
  });
});

describe('GET /parameters', () => {
  test('lists the account\'s own parameters newest first, paged', async () => {
    const account = await createAccount(app);
    const made = [];
    for (let i = 0; i < 3; i++) made.push(await created({ name: freshName('list'), value: String(i) }, account.apiKey));
    const first = (await get('?limit=2', account.apiKey)).json();
    expect(first.data.map((p: { id: string }) => p.id)).toEqual([made[2]!.id, made[1]!.id]);
    const second = (await get(`?limit=2&cursor=${first.next_cursor}`, account.apiKey)).json();
    expect(second).toEqual({ data: [expect.objectContaining({ id: made[0]!.id, value: '0' })], next_cursor: null });
    expect((await get('?limit=1000', stranger.apiKey)).json().data.map((p: { id: string }) => p.id)).not.toContain(made[0]!.id);
  });
});

describe('PUT /parameters/:id', () => {
  test('changes the given fields and audits their names, not the value', async () => {
    const p = await created({ name: freshName('upd'), value: 'one' });
    const newName = freshName('renamed');
    const res = await put(p.id, { name: newName, value: 'two', description: 'changed' });
    expect(res.statusCode).toBe(200);
    expect(res.json().data).toMatchObject({ id: p.id, name: newName, value: 'two', secret: false, description: 'changed' });
    const audit = await auditOf(p.id);
    expect(audit.map((a) => a.action)).toEqual(['parameter.create', 'parameter.update']);
    expect(audit[1]!.details).toEqual({ name: newName, secret: false, changed: ['description', 'name', 'value'] });
    expect(JSON.stringify(audit)).not.toContain('two');
  });

  test('plain → secret seals the stored value; secret → plain needs a new value', async () => {
    const p = await created({ name: freshName('flip'), value: 'kept-value' });
    const sealed = await put(p.id, { secret: true });
    expect(sealed.statusCode).toBe(200);
    expect(sealed.json().data).toMatchObject({ secret: true, value: null, has_value: true });
    const stored = await raw(p.id);
    expect(stored!.value).toBeNull();
    expect(app.vault.open(stored!.secret_value as never, boundTo('parameter.value', stored!))).toBe('kept-value');

    expectError(await put(p.id, { secret: false }), 400, 'value is required when secret changes to false (a secret value is never made readable)');
    const plain = await put(p.id, { secret: false, value: 'fresh' });
    expect(plain.json().data).toMatchObject({ secret: false, value: 'fresh', has_value: true });
    expect((await raw(p.id))!.secret_value).toBeNull();
  });

  test('a new value of a secret parameter is sealed again and not echoed', async () => {
    const p = await created({ name: freshName('rot'), value: 'old-secret', secret: true });
    const res = await put(p.id, { value: 'new-secret-value' });
    expect(res.statusCode).toBe(200);
    expect(res.body).not.toContain('new-secret-value');
    const stored = await raw(p.id);
    expect(app.vault.open(stored!.secret_value as never, boundTo('parameter.value', stored!))).toBe('new-secret-value');
  });

  test('bad input: empty body, bad name, taken name', async () => {
    const p = await created({ name: freshName('bad'), value: 'x' });
    const other = await created({ name: freshName('taken'), value: 'y' });
    expectError(await put(p.id, {}), 400, 'body must contain at least one of name, value, secret, description');
    expectError(await put(p.id, { name: '9lives' }), 400, /^name must start with a letter/);
    expectError(await put(p.id, { name: other.name }), 409, `name: a parameter named '${other.name}' already exists`);
    expect((await put(p.id, { name: p.name })).statusCode).toBe(200);
  });
});

describe('DELETE /parameters/:id', () => {
  test('deletes and audits; a second delete is a 404', async () => {
    const p = await created({ name: freshName('del'), value: 'x' });
    const res = await del(p.id);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ data: { id: p.id, deleted: true } });
    expectError(await get(`/${p.id}`), 404, `Parameter ${p.id} not found`);
    expectError(await del(p.id), 404);
    expect((await auditOf(p.id)).map((a) => a.action)).toEqual(['parameter.create', 'parameter.delete']);
  });
});

describe('tenancy and scopes', () => {
  test("another account's, unknown and malformed ids are the same 404 for every verb", async () => {
    const theirs = await created({ name: freshName('theirs'), value: 'x' }, stranger.apiKey);
    for (const id of [theirs.id, new Types.ObjectId().toHexString(), 'not-an-id']) {
      expectError(await get(`/${id}`), 404, `Parameter ${id} not found`);
      expectError(await put(id, { value: 'mine' }), 404, `Parameter ${id} not found`);
      expectError(await del(id), 404, `Parameter ${id} not found`);
    }
    expect((await raw(theirs.id))!.value).toBe('x');
  });

  test('parameters:read reads, parameters:write is needed to change', async () => {
    const reader = await createKey(app, owner.apiKey, ['parameters:read']);
    const writer = await createKey(app, owner.apiKey, ['parameters:write']);
    const none = await createKey(app, owner.apiKey, ['files:read']);
    const p = await created({ name: freshName('scoped'), value: 'x' });
    expect((await get(`/${p.id}`, reader)).statusCode).toBe(200);
    expect((await get('', reader)).statusCode).toBe(200);
    expectError(await post({ name: freshName(), value: 'x' }, reader), 403);
    expectError(await put(p.id, { value: 'y' }, reader), 403);
    expectError(await del(p.id, reader), 403);
    expectError(await get('', none), 403);
    expect((await post({ name: freshName(), value: 'x' }, writer)).statusCode).toBe(201);
  });
});

describe('templates in POST /transfers', () => {
  let source: { id: string };
  let destination: { id: string };
  const transfer = (sourcePath: string, destinationPath = '/out', token = owner.apiKey) =>
    app.inject({
      method: 'POST', url: '/api/v1/transfers', headers: auth(token),
      payload: { name: uniqueName('tpl'), sourceConnectionId: source.id, sourcePath, destinationConnectionId: destination.id, destinationPath },
    });

  beforeAll(async () => {
    source = await makeConnection(app, owner.apiKey, 'sftp');
    destination = await makeConnection(app, owner.apiKey, 's3');
  });

  test('parameters, the UTC date and the transfer\'s own id are rendered once, at create time, and stored rendered', async () => {
    const region = await created({ name: freshName('region'), value: 'eu-west' });
    const before = new Date();
    const res = await transfer(`/reports/{{params.${region.name}}}/{{date:YYYY-MM-DD}}`, '/archive/{{ run.id }}');
    const after = new Date();
    expect(res.statusCode).toBe(201);
    const { data } = res.json();
    const days = new Set([before, after].map((d) => d.toISOString().slice(0, 10)));
    expect([...days].map((d) => `/reports/eu-west/${d}`)).toContain(data.sourcePath);
    expect(data.destinationPath).toBe(`/archive/${data.id}`);
    // A later change of the parameter does not move a transfer already created.
    await put(region.id, { value: 'us-east' });
    const again = (await app.inject({ method: 'GET', url: `/api/v1/transfers/${data.id}`, headers: auth(owner.apiKey) })).json().data;
    expect(again.sourcePath).toBe(data.sourcePath);
  });

  test('a value is inserted as text and never parsed again', async () => {
    const tricky = await created({ name: freshName('tricky'), value: 'a{{run.id}}b' });
    const res = await transfer(`/in/{{params.${tricky.name}}}`);
    expect(res.statusCode).toBe(201);
    expect(res.json().data.sourcePath).toBe('/in/a{{run.id}}b');
  });

  test('bad templates are 400s naming the path field', async () => {
    expectError(await transfer('/in/{{params.nope_not_there}}'), 400, 'body.sourcePath names the parameter "nope_not_there", which does not exist');
    expectError(await transfer('/in', '/out/{{file.name}}'), 400, /^body\.destinationPath uses \{\{file\.name\}\} or \{\{file\.path\}\}/);
    expectError(await transfer('/in/{{whatever}}'), 400, /^body\.sourcePath has an unknown variable \{\{whatever\}\}/);
    expectError(await transfer('/in/{{date:YYYY'), 400, /^body\.sourcePath has "\{\{" without "\}\}"/);
    expectError(await transfer('/in/{{date:%Y}}'), 400, /^body\.sourcePath has an invalid date format/);
  });

  test('a secret parameter cannot go into a path (paths show in responses, logs and the audit trail)', async () => {
    const secret = await created({ name: freshName('pw'), value: 'hunter2-secret', secret: true });
    const res = await transfer(`/in/{{params.${secret.name}}}`);
    expectError(res, 400, `body.sourcePath names the secret parameter "${secret.name}"; secret parameters cannot be used in paths`);
    expect(res.body).not.toContain('hunter2-secret');
  });

  test("another account's parameter does not exist for this one", async () => {
    const theirs = await created({ name: freshName('foreign'), value: 'theirs' }, stranger.apiKey);
    expectError(await transfer(`/in/{{params.${theirs.name}}}`), 400, `body.sourcePath names the parameter "${theirs.name}", which does not exist`);
  });

  test('a rendered path is checked like a literal one', async () => {
    const up = await created({ name: freshName('up'), value: '../..' });
    expectError(await transfer(`/in/{{params.${up.name}}}/x`), 400, /^body\.sourcePath /);
  });
});
