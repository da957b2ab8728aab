import { Types } from 'mongoose';
import type { App } from '../src/app.js';
import type { Sealed } from '../src/lib/vault.js';
import { CONNECTION_TYPE_SPECS, CONNECTION_TYPES, type ConnectionType } from '@xfer/shared';
import { auth, buildTestApp, createAccount, createKey, expectError, type TestAccount } from './helper.js';
import { boundTo } from '../src/lib/sealed-fields.js';

let app: App;
let owner: TestAccount;
let stranger: TestAccount;

beforeAll(async () => {
  app = await buildTestApp();
  owner = await createAccount(app);
  stranger = await createAccount(app);
});
afterAll(() => app.close());

let seq = 0;
const uniqueName = (prefix = 'conn') => `${prefix}-${++seq}-${new Types.ObjectId()}`;
const SECRET = `s3cr3t-${new Types.ObjectId()}`;

/** A valid create body per type, with every required credential field. */
const VALID: Record<ConnectionType, Record<string, unknown>> = {
  s3: { credentials: { access_key_id: 'AKIAEXAMPLE', secret_access_key: SECRET } },
  r2: { credentials: { access_key_id: 'r2key', secret_access_key: SECRET, account_id: 'abc123' } },
  gcs: { credentials: { access_key_id: 'GOOG1', secret_access_key: SECRET } },
  blob: { credentials: { connection_string: `DefaultEndpointsProtocol=https;AccountName=a;AccountKey=${SECRET}` } },
  fileshare: { credentials: { account_name: 'acct', account_key: SECRET } },
  sftp: { host: 'sftp.example.test', credentials: { username: 'u', password: SECRET } },
  ftp: { host: 'ftp.example.test', credentials: { username: 'u', password: SECRET } },
  smb: { host: 'smb.example.test', credentials: { username: 'u', password: SECRET, domain: 'CORP' } },
  nfs: { host: 'nfs.example.test', path: '/exports/data' },
  webdav: { host: 'dav.example.test', credentials: { username: 'u', password: SECRET } },
  onedrive: { credentials: { client_id: 'cid', client_secret: SECRET, tenant_id: 'tid', refresh_token: `rt-${SECRET}` } },
};

const DEFAULT_PORTS: Record<ConnectionType, number> = {
  s3: 443, r2: 443, gcs: 443, blob: 443, fileshare: 443, sftp: 22, ftp: 21, smb: 445, nfs: 2049, webdav: 443, onedrive: 443,
};

const post = (payload: Record<string, unknown>, token = owner.apiKey) =>
  app.inject({ method: 'POST', url: '/api/v1/connections', headers: auth(token), payload });
const put = (id: string, payload: Record<string, unknown>, token = owner.apiKey) =>
  app.inject({ method: 'PUT', url: `/api/v1/connections/${id}`, headers: auth(token), payload });
const get = (id: string, token = owner.apiKey) =>
  app.inject({ method: 'GET', url: `/api/v1/connections/${id}`, headers: auth(token) });
const del = (id: string, token = owner.apiKey) =>
  app.inject({ method: 'DELETE', url: `/api/v1/connections/${id}`, headers: auth(token) });

async function create(type: ConnectionType, extra: Record<string, unknown> = {}, token = owner.apiKey): Promise<Record<string, unknown> & { id: string }> {
  const res = await post({ name: uniqueName(type), type, ...VALID[type], ...extra }, token);
  if (res.statusCode !== 201) throw new Error(`create ${type}: ${res.statusCode} ${res.body}`);
  return res.json().data;
}

const RESPONSE_FIELDS = ['agent_id', 'agent_pool', 'created_at', 'has_credentials', 'host', 'id', 'name', 'options', 'path', 'port', 'type', 'updated_at'];

describe('POST /connections', () => {
  test.each(CONNECTION_TYPES.map((t) => [t]))('creates a %s connection with its required fields and default port', async (type) => {
    const name = uniqueName(type);
    const res = await post({ name, type, ...VALID[type] });
    expect(res.statusCode).toBe(201);
    const { data } = res.json();
    expect(Object.keys(data).sort()).toEqual(RESPONSE_FIELDS);
    expect(data).toMatchObject({
      name, type, port: DEFAULT_PORTS[type], host: VALID[type].host ?? null, path: VALID[type].path ?? '/',
      options: {}, agent_id: null, has_credentials: type !== 'nfs',
    });
    expect(data.id).toMatch(/^[0-9a-f]{24}$/);
    expect(res.body).not.toContain(SECRET);
  });

  test('the per-type default ports of the shared table are the protocol ports', () => {
    for (const type of CONNECTION_TYPES) expect(CONNECTION_TYPE_SPECS[type].defaultPort).toBe(DEFAULT_PORTS[type]);
  });

  test('stores host, port, path (normalized), options and agent_id as given; name is trimmed', async () => {
    const agent = await app.inject({ method: 'POST', url: '/api/v1/agents', headers: auth(owner.apiKey), payload: { name: uniqueName('agent') } });
    const agentId = agent.json().data.id as string;
    const name = uniqueName('full');
    const res = await post({
      name: `  ${name} `, type: 'sftp', host: '10.0.0.5', port: 2222, path: '/data//in/./x/', agent_id: agentId,
      options: { host_key_sha256: 'SHA256:nThbg6kXUpJWGl7E1IGOCspRomTxdCARLviKw6E5SY8' },
      credentials: { username: 'u', private_key: '-----BEGIN OPENSSH PRIVATE KEY-----\n...', passphrase: 'pp' },
    });
    expect(res.statusCode).toBe(201);
    expect(res.json().data).toMatchObject({
      name, host: '10.0.0.5', port: 2222, path: '/data/in/x', agent_id: agentId, has_credentials: true,
      options: { host_key_sha256: 'SHA256:nThbg6kXUpJWGl7E1IGOCspRomTxdCARLviKw6E5SY8' },
    });
  });

  test('nfs takes integer uid/gid and nothing else', async () => {
    const withIds = await create('nfs', { credentials: { uid: 1000, gid: 0 } });
    expect(withIds.has_credentials).toBe(true);
    expectError(await post({ name: uniqueName(), type: 'nfs', host: 'h', credentials: { uid: '1000' } }), 400, /credentials\.uid must be an integer/);
    expectError(await post({ name: uniqueName(), type: 'nfs', host: 'h', credentials: { uid: 1.5 } }), 400, /credentials\.uid/);
    expectError(await post({ name: uniqueName(), type: 'nfs', host: 'h', credentials: { username: 'x' } }), 400, /unknown field 'username'/);
  });

  const requiredCases = CONNECTION_TYPES.flatMap((type) =>
    Object.keys((VALID[type].credentials as Record<string, unknown> | undefined) ?? {})
      .filter((field) => CONNECTION_TYPE_SPECS[type].credentialsRequired.some((set) => set.includes(field)))
      .map((field) => [type, field] as const));

  test.each(requiredCases)('%s without credentials.%s is 400 naming it', async (type, field) => {
    const credentials = { ...(VALID[type].credentials as Record<string, unknown>) };
    delete credentials[field];
    const res = await post({ name: uniqueName(), type, ...VALID[type], credentials });
    expectError(res, 400, new RegExp(`credentials\\.${field}\\b.*required`));
  });

  test('missing credentials altogether is 400 naming a required field', async () => {
    expectError(await post({ name: uniqueName(), type: 'ftp', host: 'h' }), 400, 'credentials.username is required for ftp connections');
    expectError(await post({ name: uniqueName(), type: 'blob' }), 400, /credentials\.connection_string or credentials\.account_name and credentials\.account_key is required/);
  });

  test('alternatives: sftp key or password, blob connection string or account (not both)', async () => {
    expect((await post({ name: uniqueName(), type: 'sftp', host: 'h', credentials: { username: 'u', private_key: 'k' } })).statusCode).toBe(201);
    expectError(await post({ name: uniqueName(), type: 'blob', credentials: { account_name: 'a' } }), 400, 'credentials.account_key is required for blob connections with account_name');
    expectError(await post({ name: uniqueName(), type: 'blob', credentials: { connection_string: 'x', account_name: 'a', account_key: 'k' } }), 400, /cannot be given together/);
  });

  test('unknown credential fields are 400 naming them', async () => {
    const res = await post({ name: uniqueName(), type: 's3', credentials: { access_key_id: 'a', secret_access_key: 'b', token: 'x', foo: 'y' } });
    expectError(res, 400, /credentials has unknown fields 'token', 'foo' for s3 connections \(allowed: access_key_id, secret_access_key, region\)/);
  });

  test('credential values must be non-empty strings', async () => {
    expectError(await post({ name: uniqueName(), type: 'ftp', host: 'h', credentials: { username: 'u', password: 12345 } }), 400, /credentials\.password must be a non-empty string/);
    expectError(await post({ name: uniqueName(), type: 'ftp', host: 'h', credentials: { username: '', password: 'p' } }), 400, /credentials\.username/);
    expectError(await post({ name: uniqueName(), type: 'ftp', host: 'h', credentials: 'user:pass' }), 400, 'body.credentials must be object');
  });

  test('host is required where the protocol needs a server; r2 takes host or account_id', async () => {
    for (const type of ['sftp', 'ftp', 'smb', 'nfs', 'webdav'] as const) {
      const { host: _host, ...body } = VALID[type];
      expectError(await post({ name: uniqueName(), type, ...body }), 400, `host is required for ${type} connections`);
    }
    expectError(await post({ name: uniqueName(), type: 'r2', credentials: { access_key_id: 'a', secret_access_key: 'b' } }), 400, 'host or credentials.account_id is required for r2 connections');
    const r2 = await create('r2', { host: 'r2.example.test', credentials: { access_key_id: 'a', secret_access_key: 'b' } });
    expect(r2.host).toBe('r2.example.test');
    expectError(await post({ name: uniqueName(), type: 'r2', credentials: { access_key_id: 'a', secret_access_key: 'b', account_id: 'bad.host/x' } }), 400, 'credentials.account_id has an invalid format');
    expectError(await post({ name: uniqueName(), type: 'sftp', host: 'https://h.example', credentials: { username: 'u', password: 'p' } }), 400, /^host must be a host name/);
  });

  test('wrong JSON types and unknown top-level fields are 400 naming the field', async () => {
    expectError(await post({ name: uniqueName(), type: 'sftp', ...VALID.sftp, port: '22' }), 400, 'body.port must be integer');
    expectError(await post({ name: uniqueName(), type: 'sftp', ...VALID.sftp, port: 70000 }), 400, /^body\.port /);
    expectError(await post({ name: uniqueName(), type: 'sftp', ...VALID.sftp, port: 0 }), 400, /^body\.port /);
    expectError(await post({ name: uniqueName(), type: 'sftp', ...VALID.sftp, secret: 'x' }), 400, "body has unknown field 'secret'");
    expectError(await post({ name: uniqueName(), type: 'dropbox', ...VALID.sftp }), 400, /^body\.type must be one of: s3, r2/);
    expectError(await post({ type: 'sftp', ...VALID.sftp }), 400, 'body.name is required');
    expectError(await post({ name: '   ', type: 'sftp', ...VALID.sftp }), 400, /^body\.name/);
    expectError(await post({ name: uniqueName(), ...VALID.sftp }), 400, 'body.type is required');
    expectError(await post({ name: uniqueName(), type: 'sftp', ...VALID.sftp, agent_id: 'agent-1' }), 400, /^body\.agent_id/);
    const theirs = await app.inject({ method: 'POST', url: '/api/v1/agents', headers: auth(stranger.apiKey), payload: { name: uniqueName('agent') } });
    for (const agentId of [theirs.json().data.id as string, String(new Types.ObjectId())]) {
      expectError(await post({ name: uniqueName(), type: 'sftp', ...VALID.sftp, agent_id: agentId }), 400, `body.agent_id ${agentId} is not an agent of this account`);
    }
  });

  test('bad paths are 400 naming the path', async () => {
    const cases: Array<[string, RegExp]> = [
      ['data', /path must start with '\/'/],
      ['/a/../b', /path must not contain '\.\.' segments/],
      ['/..', /'\.\.' segments/],
      ['/a\\b', /path must not contain backslashes/],
      ['/a\u0000b', /path must not contain NUL/],
      ['', /^body\.path/],
    ];
    for (const [path, message] of cases) expectError(await post({ name: uniqueName(), type: 'sftp', ...VALID.sftp, path }), 400, message);
    // '..' inside a name is not a parent segment.
    expect((await post({ name: uniqueName(), type: 'sftp', ...VALID.sftp, path: '/a..b/c..' })).statusCode).toBe(201);
  });

  test('options are checked per type; unknown option keys are 400', async () => {
    expect((await create('ftp', { options: { secure: 'implicit' } })).options).toEqual({ secure: 'implicit' });
    expect((await create('s3', { options: { force_path_style: true }, host: 'minio.local', port: 9000 })).options).toEqual({ force_path_style: true });
    expect((await create('webdav', { options: { secure: false } })).options).toEqual({ secure: false });
    expect((await create('onedrive', { options: { drive_id: 'b!abc-123' } })).options).toEqual({ drive_id: 'b!abc-123' });
    expectError(await post({ name: uniqueName(), type: 'ftp', ...VALID.ftp, options: { secure: 'tls' } }), 400, 'options.secure must be one of: none, explicit, implicit');
    expectError(await post({ name: uniqueName(), type: 'webdav', ...VALID.webdav, options: { secure: 'yes' } }), 400, 'options.secure must be boolean');
    expectError(await post({ name: uniqueName(), type: 'sftp', ...VALID.sftp, options: { force_path_style: true } }), 400, /options has unknown field 'force_path_style' for sftp connections/);
    expectError(await post({ name: uniqueName(), type: 'smb', ...VALID.smb, options: { x: 1 } }), 400, /options has unknown field 'x' for smb connections \(none are accepted\)/);
    expectError(await post({ name: uniqueName(), type: 'sftp', ...VALID.sftp, options: { host_key_sha256: 'md5:aa' } }), 400, 'options.host_key_sha256 has an invalid format');
  });

  test('a duplicate name in the same account is 409; another account may use it', async () => {
    const name = uniqueName('dup');
    expect((await post({ name, type: 'sftp', ...VALID.sftp })).statusCode).toBe(201);
    expectError(await post({ name, type: 'ftp', ...VALID.ftp }), 409, `A connection named '${name}' already exists`);
    expectError(await post({ name: ` ${name} `, type: 'ftp', ...VALID.ftp }), 409);
    expect((await post({ name, type: 'sftp', ...VALID.sftp }, stranger.apiKey)).statusCode).toBe(201);
  });

  test('concurrent creates with one name: exactly one wins, the rest are 409 (unique index)', async () => {
    const name = uniqueName('race');
    const results = await Promise.all(Array.from({ length: 5 }, () => post({ name, type: 'sftp', ...VALID.sftp })));
    const codes = results.map((r) => r.statusCode).sort();
    expect(codes).toEqual([201, 409, 409, 409, 409]);
  });

  test('scopes: connections:write creates, connections:read alone may not', async () => {
    const reader = await createKey(app, owner.apiKey, ['connections:read']);
    expectError(await post({ name: uniqueName(), type: 'sftp', ...VALID.sftp }, reader), 403, 'API key missing required scope');
    const writer = await createKey(app, owner.apiKey, ['connections:write']);
    expect((await post({ name: uniqueName(), type: 'sftp', ...VALID.sftp }, writer)).statusCode).toBe(201);
    expectError(await app.inject({ method: 'GET', url: '/api/v1/connections', headers: auth(writer) }), 403, 'API key missing required scope');
  });
});

describe('credentials are write-only and encrypted at rest', () => {
  test('never in create, get, list or update responses; sealed in the raw document; absent from audit', async () => {
    const created = await post({ name: uniqueName('secret'), type: 'onedrive', ...VALID.onedrive });
    const { id } = created.json().data;
    const updated = await put(id, { credentials: { client_id: 'c2', client_secret: SECRET, tenant_id: 't2', refresh_token: `rt2-${SECRET}` } });
    expect(updated.statusCode).toBe(200);
    const list = await app.inject({ method: 'GET', url: '/api/v1/connections?limit=1000', headers: auth(owner.apiKey) });
    for (const res of [created, await get(id), list, updated]) {
      expect(res.body).not.toContain(SECRET);
      expect(res.body).not.toContain('"credentials"');
      expect(res.body).not.toContain('client_id');
    }
    expect(updated.json().data.has_credentials).toBe(true);

    const raw = await app.dbConnection.collection('connections').findOne({ _id: new Types.ObjectId(id) });
    expect(raw).not.toBeNull();
    expect(JSON.stringify(raw)).not.toContain(SECRET);
    expect(JSON.stringify(raw)).not.toContain('client_id');
    const sealed = raw!.credentials as Sealed;
    expect(sealed.kid).toBe(app.vault.activeKid);
    expect(app.vault.open(sealed, boundTo('connection.credentials', raw!))).toEqual({ client_id: 'c2', client_secret: SECRET, tenant_id: 't2', refresh_token: `rt2-${SECRET}` });

    const audit = await app.dbConnection.collection('audit_events').find({ 'resource.id': id }).toArray();
    expect(audit.map((r) => r.action).sort()).toEqual(['connection.create', 'connection.update']);
    expect(audit.find((r) => r.action === 'connection.update')!.details).toMatchObject({ type: 'onedrive', changed: ['credentials'] });
    const allAudit = JSON.stringify(await app.dbConnection.collection('audit_events').find({}).toArray());
    expect(allAudit).not.toContain(SECRET);
  });

  test('loadConnectionSettings decrypts for the owner account only, resolving host, port and option defaults', async () => {
    const r2 = await create('r2');
    const settings = await app.connections.loadSettings(owner.accountId, r2.id);
    expect(settings).toMatchObject({
      id: r2.id, type: 'r2', host: 'abc123.r2.cloudflarestorage.com', port: 443, path: '/',
      credentials: { access_key_id: 'r2key', secret_access_key: SECRET, account_id: 'abc123' },
    });
    const ftp = await create('ftp');
    expect((await app.connections.loadSettings(owner.accountId, ftp.id)).options).toEqual({ secure: 'explicit' });
    const nfs = await create('nfs');
    expect((await app.connections.loadSettings(owner.accountId, nfs.id)).credentials).toEqual({});
    await expect(app.connections.loadSettings(stranger.accountId, r2.id)).rejects.toMatchObject({ statusCode: 404 });
  });
});

describe('GET /connections', () => {
  test('pages newest first with limit and next_cursor across 3 pages; filters by type', async () => {
    const acct = await createAccount(app);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await create(i % 2 === 0 ? 'sftp' : 'ftp', {}, acct.apiKey)).id);
    const seen: string[] = [];
    let cursor: string | null = null;
    const sizes: number[] = [];
    do {
      const url: string = `/api/v1/connections?limit=2${cursor ? `&cursor=${cursor}` : ''}`;
      const res = await app.inject({ method: 'GET', url, headers: auth(acct.apiKey) });
      expect(res.statusCode).toBe(200);
      const body = res.json();
      expect(Object.keys(body).sort()).toEqual(['data', 'next_cursor']);
      sizes.push(body.data.length);
      seen.push(...body.data.map((c: { id: string }) => c.id));
      cursor = body.next_cursor;
    } while (cursor);
    expect(sizes).toEqual([2, 2, 1]);
    expect(seen).toEqual([...ids].reverse());

    const ftp = await app.inject({ method: 'GET', url: '/api/v1/connections?type=ftp', headers: auth(acct.apiKey) });
    expect(ftp.json().data.map((c: { id: string }) => c.id)).toEqual([ids[3], ids[1]]);
    expectError(await app.inject({ method: 'GET', url: '/api/v1/connections?type=zip', headers: auth(acct.apiKey) }), 400, /querystring\.type/);
    expectError(await app.inject({ method: 'GET', url: '/api/v1/connections?cursor=nope', headers: auth(acct.apiKey) }), 400, /cursor/);
  });

  test("lists only the caller's connections", async () => {
    const theirs = await create('sftp', {}, stranger.apiKey);
    const res = await app.inject({ method: 'GET', url: '/api/v1/connections?limit=1000', headers: auth(owner.apiKey) });
    expect(res.json().data.map((c: { id: string }) => c.id)).not.toContain(theirs.id);
  });
});

describe('GET /connections/:id', () => {
  test('answers the connection; malformed, unknown and other accounts\' ids are 404', async () => {
    const mine = await create('smb');
    const res = await get(mine.id);
    expect(res.statusCode).toBe(200);
    expect(res.json().data).toEqual(mine);
    const unknown = String(new Types.ObjectId());
    expectError(await get(unknown), 404, `Connection ${unknown} not found`);
    expectError(await get('not-an-id'), 404, 'Connection not-an-id not found');
    expectError(await get(mine.id, stranger.apiKey), 404, `Connection ${mine.id} not found`);
  });
});

describe('PUT /connections/:id', () => {
  test('changes only the given fields', async () => {
    const before = await create('sftp', { port: 2222, options: { host_key_sha256: 'SHA256:nThbg6kXUpJWGl7E1IGOCspRomTxdCARLviKw6E5SY8' } });
    const name = uniqueName('renamed');
    const res = await put(before.id, { name, path: '/new/base/' });
    expect(res.statusCode).toBe(200);
    const after = res.json().data;
    expect(after).toEqual({ ...before, name, path: '/new/base', updated_at: after.updated_at });
    expect(Date.parse(after.updated_at)).toBeGreaterThanOrEqual(Date.parse(before.updated_at as string));
    // Stored credentials are kept when none are given.
    const settings = await app.connections.loadSettings(owner.accountId, before.id);
    expect(settings.credentials).toEqual(VALID.sftp.credentials);
    const audit = await app.db.auditEvents.findOne({ 'resource.id': before.id, action: 'connection.update' }).lean();
    expect(audit!.details).toEqual({ name, type: 'sftp', changed: ['name', 'path'] });
  });

  test('credentials, when given, replace the stored ones entirely and are re-validated', async () => {
    const conn = await create('sftp');
    expect((await put(conn.id, { credentials: { username: 'v', private_key: 'KEY' } })).statusCode).toBe(200);
    expect((await app.connections.loadSettings(owner.accountId, conn.id)).credentials).toEqual({ username: 'v', private_key: 'KEY' });
    expectError(await put(conn.id, { credentials: { password: 'p' } }), 400, 'credentials.username is required for sftp connections');
    expectError(await put(conn.id, { credentials: { username: 'u', password: 'p', extra: 'x' } }), 400, /unknown field 'extra'/);
  });

  test('the merged result is validated: clearing a required host, or options of another type, is 400', async () => {
    const conn = await create('ftp');
    expectError(await put(conn.id, { host: null }), 400, 'host is required for ftp connections');
    expectError(await put(conn.id, { options: { secure: true } }), 400, 'options.secure must be string');
    expectError(await put(conn.id, { options: { force_path_style: true } }), 400, /options has unknown field 'force_path_style' for ftp/);
    expectError(await put(conn.id, { port: '21' }), 400, /^body\.port must be integer/);
    expectError(await put(conn.id, { path: '/a/../../etc' }), 400, /'\.\.' segments/);
    expectError(await put(conn.id, { secret: 'x' }), 400, "body has unknown field 'secret'");
    expectError(await put(conn.id, {}), 400);
    expect((await get(conn.id)).json().data).toEqual(conn);
  });

  test('a type change needs credentials again; the default port follows the type, an explicit one stays', async () => {
    const conn = await create('sftp');
    expectError(await put(conn.id, { type: 'ftp' }), 400, 'credentials are required when type changes (the stored ones are for sftp)');
    const res = await put(conn.id, { type: 'ftp', credentials: { username: 'f', password: 'p' } });
    expect(res.statusCode).toBe(200);
    expect(res.json().data).toMatchObject({ type: 'ftp', port: 21, host: VALID.sftp.host });
    const pinned = await create('sftp', { port: 2200 });
    const moved = await put(pinned.id, { type: 'nfs', credentials: {} });
    expect(moved.json().data).toMatchObject({ type: 'nfs', port: 2200, has_credentials: false });
    expect((await put(pinned.id, { port: null })).json().data.port).toBe(2049);
    // Same type again is not a change.
    expect((await put(conn.id, { type: 'ftp', name: uniqueName() })).statusCode).toBe(200);
  });

  test('renaming onto another connection\'s name is 409; keeping its own name is fine', async () => {
    const a = await create('sftp');
    const b = await create('sftp');
    expectError(await put(b.id, { name: a.name }), 409, `A connection named '${a.name as string}' already exists`);
    expect((await put(a.id, { name: a.name })).statusCode).toBe(200);
  });

  test("another account's connection is 404 and unchanged; malformed ids are 404", async () => {
    const mine = await create('webdav');
    expectError(await put(mine.id, { name: 'hijacked' }, stranger.apiKey), 404, `Connection ${mine.id} not found`);
    expect((await get(mine.id)).json().data.name).toBe(mine.name);
    expectError(await put('zzz', { name: 'x' }), 404, 'Connection zzz not found');
  });
});

describe('stored credentials stay bound to where they were given (PUT without credentials)', () => {
  const rebind = (field: string) => new RegExp(`^${field.replace('.', '\\.')} cannot change without credentials`);
  const PIN = 'SHA256:nThbg6kXUpJWGl7E1IGOCspRomTxdCARLviKw6E5SY8';

  test('host, port and agent_id: 400 naming the field, nothing changed; with credentials it is allowed', async () => {
    const agent = await app.inject({ method: 'POST', url: '/api/v1/agents', headers: auth(owner.apiKey), payload: { name: uniqueName('agent') } });
    expect(agent.statusCode).toBe(201);
    const agentId = agent.json().data.id as string;
    const conn = await create('sftp');
    expectError(await put(conn.id, { host: 'attacker.example.net' }), 400, rebind('host'));
    expectError(await put(conn.id, { port: 2222 }), 400, rebind('port'));
    expectError(await put(conn.id, { agent_id: agentId }), 400, rebind('agent_id'));
    expectError(await put(conn.id, { name: uniqueName(), host: 'attacker.example.net' }), 400, rebind('host'));
    expect((await get(conn.id)).json().data).toEqual(conn);
    const settings = await app.connections.loadSettings(owner.accountId, conn.id);
    expect(settings.host).toBe(VALID.sftp.host);
    // Restating the current values is no change; other fields may change freely.
    expect((await put(conn.id, { host: 'SFTP.example.test', port: 22, agent_id: null, path: '/elsewhere' })).statusCode).toBe(200);
    const moved = await put(conn.id, { host: 'new.example.test', agent_id: agentId, credentials: { username: 'u2', password: 'p2' } });
    expect(moved.statusCode).toBe(200);
    expect(moved.json().data).toMatchObject({ host: 'new.example.test', agent_id: agentId });
    // Pinned to an agent: unpinning (any agent of the account may then carry them) needs them too.
    expectError(await put(conn.id, { agent_id: null }), 400, rebind('agent_id'));
  });

  test('a connection without stored credentials (nfs) may move freely', async () => {
    const conn = await create('nfs');
    expect((await put(conn.id, { host: 'other-nfs.example.test', port: 2050 })).statusCode).toBe(200);
  });

  const securityCases: Array<[ConnectionType, Record<string, unknown>, Record<string, unknown>, string]> = [
    ['sftp', { options: { host_key_sha256: PIN } }, { options: {} }, 'options.host_key_sha256'],
    ['sftp', {}, { options: { host_key_sha256: PIN } }, 'options.host_key_sha256'],
    ['ftp', {}, { options: { secure: 'none' } }, 'options.secure'],
    ['ftp', {}, { options: { tls_cert_sha256: 'ab'.repeat(32) } }, 'options.tls_cert_sha256'],
    ['webdav', {}, { options: { secure: false } }, 'options.secure'],
    ['s3', {}, { options: { secure: false } }, 'options.secure'],
    ['s3', {}, { options: { force_path_style: true } }, 'options.force_path_style'],
    ['s3', {}, { host: 'minio.attacker.example' }, 'host'],
    ['r2', {}, { options: { secure: false } }, 'options.secure'],
    ['gcs', {}, { host: 'gcs.attacker.example' }, 'host'],
    ['blob', {}, { options: { endpoint_suffix: 'attacker.example' } }, 'options.endpoint_suffix'],
    ['fileshare', {}, { options: { endpoint_suffix: 'attacker.example' } }, 'options.endpoint_suffix'],
    ['onedrive', {}, { options: { login_host: 'login.attacker.example' } }, 'options.login_host'],
    ['onedrive', {}, { host: 'graph.attacker.example' }, 'host'],
    ['smb', {}, { port: 1445 }, 'port'],
    ['gcs', {}, { options: { secure: false } }, 'options.secure'],
    ['nfs', { credentials: { uid: 1000, gid: 1000 } }, { options: { mount_port: '635' } }, 'options.mount_port'],
  ];
  test.each(securityCases)('%s %j then %j is 400 naming %s', async (type, initial, change, field) => {
    const conn = await create(type, initial);
    expectError(await put(conn.id, change), 400, rebind(field));
    expect((await get(conn.id)).json().data).toEqual(conn);
  });

  test('options that do not decide where credentials go change freely; an explicit default is no change', async () => {
    const drive = await create('onedrive');
    expect((await put(drive.id, { options: { drive_id: 'b!drive' } })).statusCode).toBe(200);
    expect((await put(drive.id, { options: { drive_id: 'b!drive', login_host: 'login.microsoftonline.com' } })).statusCode).toBe(200);
    const ftp = await create('ftp');
    expect((await put(ftp.id, { options: { secure: 'explicit' } })).statusCode).toBe(200);
  });

  test('every option marked bindsCredentials is one of the cases above', () => {
    const marked = Object.entries(CONNECTION_TYPE_SPECS).flatMap(([type, spec]) =>
      Object.entries(spec.options).filter(([, o]) => o.bindsCredentials).map(([key]) => `${type} options.${key}`));
    const covered = new Set(securityCases.map(([type, , , field]) => `${type} ${field}`));
    expect(marked.filter((m) => !covered.has(m))).toEqual([]);
  });
});

describe('DELETE /connections/:id', () => {
  test('deletes permanently: 200 {id, deleted}, then 404; audited', async () => {
    const conn = await create('s3');
    const res = await del(conn.id);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ data: { id: conn.id, deleted: true } });
    expectError(await get(conn.id), 404, `Connection ${conn.id} not found`);
    expectError(await del(conn.id), 404);
    expect(await app.dbConnection.collection('connections').countDocuments({ _id: new Types.ObjectId(conn.id) })).toBe(0);
    const audit = await app.db.auditEvents.findOne({ 'resource.id': conn.id, action: 'connection.delete' }).lean();
    expect(audit).toMatchObject({ outcome: 'success', resource: { type: 'connection', id: conn.id }, details: { name: conn.name, type: 's3' } });
    // The name is free again.
    expect((await post({ name: conn.name, type: 's3', ...VALID.s3 })).statusCode).toBe(201);
  });

  test("another account's connection is 404 and survives; malformed ids are 404", async () => {
    const mine = await create('gcs');
    expectError(await del(mine.id, stranger.apiKey), 404, `Connection ${mine.id} not found`);
    expect((await get(mine.id)).statusCode).toBe(200);
    expectError(await del('123'), 404, 'Connection 123 not found');
  });
});
