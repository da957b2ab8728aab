import type { App } from '../src/app.js';
import { auth, buildTestApp, createAccount, expectError, login, type TestAccount } from './helper.js';
import { uploaded } from './files-helper.js';

// Service principals that do something: a registered principal gets API keys of its own, which
// act as it in the audit trail, are listed by principal and revoked with it.

let app: App;
let owner: TestAccount;
let session: string;

beforeAll(async () => {
  app = await buildTestApp({ scanner: { kind: 'none' } });
  owner = await createAccount(app, 'team');
  session = await login(app, owner.email, owner.password);
});
afterAll(() => app.close());

const putPrincipals = (list: Array<{ name: string; client_id: string }>) =>
  app.inject({ method: 'PUT', url: '/api/v1/settings/service-principals', headers: auth(session), payload: { service_principals: list } });
const createKey = (payload: Record<string, unknown>, token = owner.apiKey) =>
  app.inject({ method: 'POST', url: '/api/v1/api-keys', headers: auth(token), payload: { scopes: ['files:read', 'files:write', 'activity:read'], ...payload } });
const listKeys = (query = '') => app.inject({ method: 'GET', url: `/api/v1/api-keys${query}`, headers: auth(owner.apiKey) });

it('a registered principal gets its own keys, which act as it in the audit trail and are listed by principal', async () => {
  expect((await putPrincipals([{ name: 'CI', client_id: 'ci-app' }, { name: 'Backup', client_id: 'backup-app' }])).statusCode).toBe(200);
  const ci = await createKey({ name: 'ci deploy', service_principal: 'ci-app' });
  expect(ci.statusCode).toBe(201);
  expect(ci.json().data).toMatchObject({ name: 'ci deploy', service_principal: 'ci-app', key: expect.stringMatching(/^svc_/) });
  const backup = await createKey({ name: 'backup', service_principal: 'backup-app' });
  const plain = await createKey({ name: 'plain' });
  expect(plain.json().data.service_principal).toBeNull();

  // Listed by principal; the whole list shows which key acts as whom.
  const onlyCi = (await listKeys('?service_principal=ci-app')).json().data;
  expect(onlyCi.map((k: { id: string }) => k.id)).toEqual([ci.json().data.id]);
  const all = (await listKeys()).json().data as Array<{ id: string; service_principal: string | null }>;
  expect(all.find((k) => k.id === backup.json().data.id)?.service_principal).toBe('backup-app');

  // What the key does is recorded with the principal as the actor.
  const key = ci.json().data.key as string;
  expect((await app.inject({ method: 'GET', url: '/api/v1/files', headers: auth(key) })).statusCode).toBe(200);
  const file = await uploaded(app, key, 'report.csv', 'a,b\n');
  const created = await app.db.auditEvents.findOne({ account_id: owner.accountId, action: 'api_key.create', 'resource.id': ci.json().data.id }).lean();
  expect(created?.details).toMatchObject({ service_principal: 'ci-app' });
  const trail = await app.inject({ method: 'GET', url: '/api/v1/activity?actor_type=service_principal&actor_id=ci-app', headers: auth(key) });
  expect(trail.statusCode).toBe(200);
  expect(trail.json().data).toEqual([expect.objectContaining({
    action: 'file.upload', actor: { type: 'service_principal', id: 'ci-app' }, resource: { type: 'file', id: file.id },
  })]);
  // The file says who uploaded it, the same way.
  const record = await app.inject({ method: 'GET', url: `/api/v1/files/${file.id}`, headers: auth(owner.apiKey) });
  expect(record.json().data.uploaded_by).toEqual({ type: 'service_principal', id: 'ci-app' });
});

it('only a registered principal gets keys (400 naming the field); another account\'s registrations do not count', async () => {
  expectError(await createKey({ name: 'x', service_principal: 'nobody' }), 400, 'body.service_principal is not a registered service principal: nobody');
  expectError(await createKey({ name: 'x', service_principal: 'has space' }), 400, /service_principal/);
  const other = await createAccount(app, 'team');
  expectError(await createKey({ name: 'x', service_principal: 'ci-app' }, other.apiKey), 400, /not a registered service principal: ci-app/);
  expectError(await app.inject({ method: 'GET', url: '/api/v1/api-keys?service_principal=', headers: auth(owner.apiKey) }), 400, /service_principal/);
});

it('removing a principal revokes its keys at once, each revocation audited; the other principals\' keys stay', async () => {
  const keys = (await listKeys()).json().data as Array<{ id: string; service_principal: string | null }>;
  const ciKey = await createKey({ name: 'ci second', service_principal: 'ci-app' });
  const token = ciKey.json().data.key as string;
  expect((await app.inject({ method: 'GET', url: '/api/v1/files', headers: auth(token) })).statusCode).toBe(200);

  expect((await putPrincipals([{ name: 'Backup', client_id: 'backup-app' }])).statusCode).toBe(200);
  expectError(await app.inject({ method: 'GET', url: '/api/v1/files', headers: auth(token) }), 401, 'Invalid or expired credentials');
  expect((await listKeys('?service_principal=ci-app')).json().data).toEqual([]);
  expect((await listKeys('?service_principal=backup-app')).json().data).toHaveLength(1);
  const revocations = await app.db.auditEvents.find({ account_id: owner.accountId, action: 'api_key.revoke', 'details.reason': 'service principal removed' }).lean();
  expect(revocations.map((r) => r.resource?.id).sort()).toEqual([ciKey.json().data.id, ...keys.filter((k) => k.service_principal === 'ci-app').map((k) => k.id)].sort());
  expect(revocations.every((r) => r.actor?.type === 'user' && r.actor?.id === owner.userId)).toBe(true);
});
