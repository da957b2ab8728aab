import { randomBytes } from 'node:crypto';
import type { App } from '../src/app.js';
import { Messages, SCOPES, scopesForRole, type Role } from '@xfer/shared';
import { auth, buildTestApp, createAccount, createKey, expectError, login, type TestAccount } from './helper.js';

let app: App;
let owner: TestAccount;
let ownerSession: string;

beforeAll(async () => {
  app = await buildTestApp();
  owner = await createAccount(app);
  ownerSession = await login(app, owner.email, owner.password);
});
afterAll(() => app.close());

const LAST_OWNER = 'An account must keep at least one owner';

const newEmail = (tag = 'user') => `${tag}-${randomBytes(4).toString('hex')}@example.test`;
const newPassword = () => `pw-${randomBytes(10).toString('hex')}`;

const createUser = (token: string, payload: Record<string, unknown>) =>
  app.inject({ method: 'POST', url: '/api/v1/users', headers: auth(token), payload });
const updateUser = (token: string, id: string, payload: Record<string, unknown>) =>
  app.inject({ method: 'PUT', url: `/api/v1/users/${id}`, headers: auth(token), payload });
const deleteUser = (token: string, id: string) =>
  app.inject({ method: 'DELETE', url: `/api/v1/users/${id}`, headers: auth(token) });
const getUser = (token: string, id: string) =>
  app.inject({ method: 'GET', url: `/api/v1/users/${id}`, headers: auth(token) });

interface Member { id: string; email: string; password: string; session: string }

/** Creates a user with `role` through the API (as the account's owner unless told) and signs it in. */
async function addUser(role: Role, token = ownerSession): Promise<Member> {
  const email = newEmail(role);
  const password = newPassword();
  const res = await createUser(token, { email, role, password });
  if (res.statusCode !== 201) throw new Error(`addUser: ${res.statusCode} ${res.body}`);
  return { id: res.json().data.id, email, password, session: await login(app, email, password) };
}

describe('POST /users', () => {
  test('creates a user: 201, email lower-cased, password hashed, never shown; audited without it', async () => {
    const email = newEmail('New.Person').toUpperCase();
    const password = newPassword();
    const res = await createUser(owner.apiKey, { email, name: 'New Person', role: 'member', password });
    expect(res.statusCode).toBe(201);
    const user = res.json().data;
    expect(Object.keys(user).sort()).toEqual(['created_at', 'email', 'id', 'last_login_at', 'name', 'role']);
    expect(user).toMatchObject({ email: email.toLowerCase(), name: 'New Person', role: 'member', last_login_at: null });
    const stored = await app.db.users.findById(user.id).lean();
    expect(stored!.password_hash).toMatch(/^scrypt\$/);
    expect(stored!.password_hash).not.toContain(password);
    const records = await app.db.auditEvents.find({ action: 'user.create', 'resource.id': user.id }).lean();
    expect(records).toHaveLength(1);
    expect(records[0]!.outcome).toBe('success');
    expect(JSON.stringify(records)).not.toContain(password);
    // The new user can sign in with the lower-cased email.
    await expect(login(app, email.toLowerCase(), password)).resolves.toEqual(expect.any(String));
  });

  test('the name defaults to the part of the email before the @', async () => {
    const res = await createUser(ownerSession, { email: 'Defaulted.Name@example.test', role: 'viewer', password: newPassword() });
    expect(res.json().data.name).toBe('defaulted.name');
  });

  test('an email already used, in any case and in any account, is 409', async () => {
    const email = newEmail('dup');
    expect((await createUser(ownerSession, { email, role: 'viewer', password: newPassword() })).statusCode).toBe(201);
    expectError(await createUser(ownerSession, { email: email.toUpperCase(), role: 'viewer', password: newPassword() }), 409, /already exists/);
    const other = await createAccount(app);
    expectError(await createUser(other.apiKey, { email, role: 'viewer', password: newPassword() }), 409, /already exists/);
  });

  test('invalid input is 400 naming the field', async () => {
    const ok = { email: newEmail(), role: 'member', password: newPassword() };
    expectError(await createUser(ownerSession, { ...ok, email: 'not-an-email' }), 400, /email/);
    expectError(await createUser(ownerSession, { ...ok, password: 'short' }), 400, /password/);
    expectError(await createUser(ownerSession, { ...ok, role: 'superuser' }), 400, /role must be one of: owner, admin, member, viewer/);
    expectError(await createUser(ownerSession, { ...ok, password_hash: 'x' }), 400, /unknown field 'password_hash'/);
    expectError(await createUser(ownerSession, { email: ok.email, role: 'member' }), 400, /password is required/);
    expectError(await createUser(ownerSession, { ...ok, name: '   ' }), 400, /name/);
  });
});

describe('GET /users', () => {
  test('lists the account users newest first with paging, never a hash', async () => {
    const acct = await createAccount(app);
    const ids: string[] = [];
    for (const role of ['admin', 'member', 'viewer'] as const) {
      const res = await createUser(acct.apiKey, { email: newEmail(role), role, password: newPassword() });
      ids.push(res.json().data.id);
    }
    const first = await app.inject({ method: 'GET', url: '/api/v1/users?limit=2', headers: auth(acct.apiKey) });
    expect(first.statusCode).toBe(200);
    const page1 = first.json();
    expect(page1.data.map((u: { id: string }) => u.id)).toEqual([ids[2], ids[1]]);
    const second = await app.inject({ method: 'GET', url: `/api/v1/users?limit=2&cursor=${page1.next_cursor}`, headers: auth(acct.apiKey) });
    const page2 = second.json();
    expect(page2.data.map((u: { id: string }) => u.id)).toEqual([ids[0], acct.userId]);
    expect(page2.next_cursor).toBeNull();
    expect(JSON.stringify([page1, page2])).not.toMatch(/password|scrypt|sessions_valid_after/);
  });

  test("another account's user is 404, like a malformed or unknown id", async () => {
    const other = await createAccount(app);
    expectError(await getUser(ownerSession, other.userId), 404);
    expectError(await getUser(ownerSession, 'nope'), 404);
    expectError(await getUser(ownerSession, '0123456789abcdef01234567'), 404);
    expectError(await updateUser(ownerSession, other.userId, { name: 'x' }), 404);
    expectError(await deleteUser(ownerSession, other.userId), 404);
    const list = await app.inject({ method: 'GET', url: '/api/v1/users', headers: auth(owner.apiKey) });
    expect(list.json().data.map((u: { id: string }) => u.id)).not.toContain(other.userId);
  });

  test('GET /users/:id shows one user', async () => {
    const res = await getUser(owner.apiKey, owner.userId);
    expect(res.statusCode).toBe(200);
    expect(res.json().data).toMatchObject({ id: owner.userId, email: owner.email, role: 'owner' });
    expect(res.json().data.last_login_at).toEqual(expect.any(String));
  });

  test("a sign-in writes nothing to the user's document (FerretDB writes whole documents back: it would undo a role change racing it)", async () => {
    const member = await addUser('member');
    const before = (await getUser(owner.apiKey, member.id)).json().data.last_login_at as string;
    const writes: string[] = [];
    app.dbConnection.set('debug', (collection: string, method: string) => {
      if (collection === 'users' && /^(insert|update|replace|findOneAndUpdate|findOneAndReplace|bulkWrite)/.test(method)) writes.push(method);
    });
    try {
      await login(app, member.email, member.password);
    } finally {
      app.dbConnection.set('debug', false);
    }
    expect(writes).toEqual([]);
    const after = (await getUser(owner.apiKey, member.id)).json().data.last_login_at as string;
    expect(Date.parse(after)).toBeGreaterThanOrEqual(Date.parse(before));
    expect((await app.inject({ method: 'GET', url: '/api/v1/users?limit=100', headers: auth(owner.apiKey) })).json().data
      .find((u: { id: string }) => u.id === member.id).last_login_at).toBe(after);
  });
});

describe('roles', () => {
  test('a viewer reads users but cannot change them', async () => {
    const viewer = await addUser('viewer');
    expect((await app.inject({ method: 'GET', url: '/api/v1/users', headers: auth(viewer.session) })).statusCode).toBe(200);
    expectError(await createUser(viewer.session, { email: newEmail(), role: 'viewer', password: newPassword() }), 403, /role \(viewer\)/);
    expectError(await updateUser(viewer.session, viewer.id, { name: 'me' }), 403, /role \(viewer\)/);
    expectError(await deleteUser(viewer.session, owner.userId), 403, /role \(viewer\)/);
  });

  test('a member cannot manage or even list users', async () => {
    const member = await addUser('member');
    expectError(await app.inject({ method: 'GET', url: '/api/v1/users', headers: auth(member.session) }), 403, /role \(member\)/);
    expectError(await createUser(member.session, { email: newEmail(), role: 'viewer', password: newPassword() }), 403, /role \(member\)/);
  });

  test('an admin manages non-owners but cannot create, promote, change or delete owners', async () => {
    const admin = await addUser('admin');
    const member = await addUser('member', admin.session);
    expect((await updateUser(admin.session, member.id, { role: 'admin', name: 'Promoted' })).json().data).toMatchObject({ role: 'admin', name: 'Promoted' });
    expectError(await createUser(admin.session, { email: newEmail(), role: 'owner', password: newPassword() }), 403, /Only an owner can create owners/);
    expectError(await updateUser(admin.session, member.id, { role: 'owner' }), 403, /Only an owner can promote/);
    expectError(await updateUser(admin.session, owner.userId, { name: 'Renamed' }), 403, /Only an owner can change an owner/);
    expectError(await deleteUser(admin.session, owner.userId), 403, /Only an owner can delete an owner/);
    expect((await getUser(owner.apiKey, owner.userId)).json().data.role).toBe('owner');
    const denied = await app.db.auditEvents.find({ action: { $in: ['user.create', 'user.update', 'user.delete'] }, outcome: 'denied', 'actor.id': admin.id }).lean();
    expect(denied).toHaveLength(4);
    expect((await deleteUser(admin.session, member.id)).json()).toEqual({ data: { id: member.id, deleted: true } });
  });

  test('an API key with users:write acts as an admin, never as an owner', async () => {
    const key = await createKey(app, owner.apiKey, [...SCOPES]);
    const res = await createUser(key, { email: newEmail('by-key'), role: 'admin', password: newPassword() });
    expect(res.statusCode).toBe(201);
    expectError(await createUser(key, { email: newEmail(), role: 'owner', password: newPassword() }), 403, /Only an owner can create owners.*API key/);
    expectError(await updateUser(key, res.json().data.id, { role: 'owner' }), 403, /Only an owner/);
    expectError(await updateUser(key, owner.userId, { name: 'x' }), 403, /Only an owner/);
    const readOnly = await createKey(app, owner.apiKey, ['users:read']);
    expect((await getUser(readOnly, owner.userId)).statusCode).toBe(200);
    expectError(await createUser(readOnly, { email: newEmail(), role: 'viewer', password: newPassword() }), 403, Messages.missingScope);
    expectError(await deleteUser(readOnly, res.json().data.id), 403, Messages.missingScope);
  });

  test('a role change takes effect on the very next request', async () => {
    const admin = await addUser('admin');
    expect((await app.inject({ method: 'GET', url: '/api/v1/users', headers: auth(admin.session) })).statusCode).toBe(200);
    expect((await updateUser(ownerSession, admin.id, { role: 'member' })).statusCode).toBe(200);
    expectError(await app.inject({ method: 'GET', url: '/api/v1/users', headers: auth(admin.session) }), 403, /role \(member\)/);
  });
});

describe('owners', () => {
  test('an owner creates and promotes owners, and the last owner cannot be demoted', async () => {
    const acct = await createAccount(app);
    const first = await login(app, acct.email, acct.password);
    const second = await addUser('admin', first);
    const promoted = await updateUser(first, second.id, { role: 'owner' });
    expect(promoted.json().data.role).toBe('owner');
    // Two owners: one may step down.
    expect((await updateUser(second.session, acct.userId, { role: 'admin' })).json().data.role).toBe('admin');
    // Now the second is the last owner.
    expectError(await updateUser(second.session, second.id, { role: 'admin' }), 409, LAST_OWNER);
    expect(await app.db.users.countDocuments({ account_id: acct.accountId, role: 'owner' })).toBe(1);
    const third = await createUser(second.session, { email: newEmail('owner'), role: 'owner', password: newPassword() });
    expect(third.json().data.role).toBe('owner');
  });

  test('an owner deletes another owner, never themself', async () => {
    const acct = await createAccount(app);
    const first = await login(app, acct.email, acct.password);
    expectError(await deleteUser(first, acct.userId), 409, /cannot delete your own user/);
    const second = await addUser('owner', first);
    expect((await deleteUser(second.session, acct.userId)).statusCode).toBe(200);
    expectError(await getUser(second.session, acct.userId), 404);
    // The deleted owner's session is gone with it.
    expectError(await getUser(first, second.id), 401, Messages.unauthenticated);
    expectError(await deleteUser(second.session, second.id), 409);
    expect(await app.db.users.countDocuments({ account_id: acct.accountId, role: 'owner' })).toBe(1);
  });

  test('two owners demoting each other at once never leave the account without an owner', async () => {
    for (let round = 0; round < 3; round++) {
      const acct = await createAccount(app);
      const a = await login(app, acct.email, acct.password);
      const b = await addUser('owner', a);
      const [ra, rb] = await Promise.all([updateUser(a, b.id, { role: 'admin' }), updateUser(b.session, acct.userId, { role: 'admin' })]);
      // Either one wins (the other sees 403 or 409), or both are undone (409, 409): never two 200s.
      const ok = [ra.statusCode, rb.statusCode].filter((s) => s === 200).length;
      expect([ra.statusCode, rb.statusCode].every((s) => [200, 403, 409].includes(s))).toBe(true);
      expect(ok).toBeLessThanOrEqual(1);
      expect(await app.db.users.countDocuments({ account_id: acct.accountId, role: 'owner' })).toBe(2 - ok);
    }
  });
});

describe('PUT /users/:id', () => {
  test('a password change ends the old sessions; the new password works, the old does not', async () => {
    const member = await addUser('member');
    const other = await login(app, member.email, member.password);
    const activity = (token: string) => app.inject({ method: 'GET', url: '/api/v1/activity?limit=1', headers: auth(token) });
    expect((await activity(member.session)).statusCode).toBe(200);
    const password = newPassword();
    const res = await updateUser(ownerSession, member.id, { password });
    expect(res.statusCode).toBe(200);
    expectError(await activity(member.session), 401, Messages.unauthenticated);
    expectError(await activity(other), 401, Messages.unauthenticated);
    await expect(login(app, member.email, member.password)).rejects.toThrow(/401/);
    expect((await activity(await login(app, member.email, password))).statusCode).toBe(200);
    const record = await app.db.auditEvents.findOne({ action: 'user.update', 'resource.id': member.id }).lean();
    expect(record!.details).toMatchObject({ fields: ['password'], sessions_revoked: true });
    expect(JSON.stringify(record)).not.toContain(password);
  });

  test('renaming keeps sessions; an empty or unknown body is 400', async () => {
    const viewer = await addUser('viewer');
    const res = await updateUser(owner.apiKey, viewer.id, { name: 'Viewer Renamed' });
    expect(res.json().data).toMatchObject({ id: viewer.id, name: 'Viewer Renamed', role: 'viewer' });
    expect((await getUser(viewer.session, viewer.id)).statusCode).toBe(200);
    expectError(await updateUser(owner.apiKey, viewer.id, {}), 400);
    expectError(await updateUser(owner.apiKey, viewer.id, { email: 'x@example.test' }), 400, /unknown field 'email'/);
    expectError(await updateUser(owner.apiKey, viewer.id, { role: 'root' }), 400, /role/);
  });

  test('changes are audited with the role transition', async () => {
    const viewer = await addUser('viewer');
    await updateUser(ownerSession, viewer.id, { role: 'admin' });
    const record = await app.db.auditEvents.findOne({ action: 'user.update', 'resource.id': viewer.id }).lean();
    expect(record).toMatchObject({ outcome: 'success', actor: { type: 'user', id: owner.userId } });
    expect(record!.details).toEqual({ fields: ['role'], role_from: 'viewer', role_to: 'admin' });
  });
});

describe('DELETE /users/:id', () => {
  test('deletes the user, its per-user settings and its sessions; audited; a second delete is 404', async () => {
    const viewer = await addUser('viewer');
    expect((await app.inject({ method: 'PUT', url: '/api/v1/settings/mfa', headers: auth(viewer.session), payload: { enabled: true } })).statusCode).toBe(200);
    const res = await deleteUser(owner.apiKey, viewer.id);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ data: { id: viewer.id, deleted: true } });
    expect(await app.db.settings.countDocuments({ user_id: viewer.id })).toBe(0);
    expectError(await getUser(viewer.session, viewer.id), 401, Messages.unauthenticated);
    expectError(await deleteUser(owner.apiKey, viewer.id), 404);
    const record = await app.db.auditEvents.findOne({ action: 'user.delete', 'resource.id': viewer.id }).lean();
    expect(record).toMatchObject({ outcome: 'success', details: { email: viewer.email, role: 'viewer' } });
  });
});

describe('no escalation through users (plugins/app/access/grant-rules.ts)', () => {
  const usersOnly = () => createKey(app, owner.apiKey, ['users:read', 'users:write']);
  /** Every scope of `role` plus users:*, so the key may manage users of that role. */
  const keyFor = (role: Role) => createKey(app, owner.apiKey, [...new Set([...scopesForRole(role), 'users:read', 'users:write'])]);

  test('a key holding only users:write cannot create an admin (whose session could mint any key)', async () => {
    const key = await usersOnly();
    const email = newEmail('escalate');
    const res = await createUser(key, { email, role: 'admin', password: newPassword() });
    expectError(res, 403, /^Cannot create a user with the role admin: it carries scopes the calling key does not hold \(.*api-keys:write/);
    expect(await app.db.users.exists({ email })).toBeNull();
    const denied = await app.db.auditEvents.find({ account_id: owner.accountId, action: 'user.create', outcome: 'denied' }).lean();
    expect(denied.some((r) => (r.details as { reason?: string })?.reason === 'scope escalation')).toBe(true);
  });

  test('a key creates exactly the roles whose scopes it holds', async () => {
    const viewerKey = await keyFor('viewer');
    expect((await createUser(viewerKey, { email: newEmail(), role: 'viewer', password: newPassword() })).statusCode).toBe(201);
    expectError(await createUser(viewerKey, { email: newEmail(), role: 'member', password: newPassword() }), 403, /role member: .*files:write/);
    const memberKey = await keyFor('member');
    expect((await createUser(memberKey, { email: newEmail(), role: 'member', password: newPassword() })).statusCode).toBe(201);
    expectError(await createUser(memberKey, { email: newEmail(), role: 'admin', password: newPassword() }), 403, /role admin: .*api-keys:read/);
  });

  test('no promotion beyond the caller: a key below admin cannot make a member an admin', async () => {
    // Member and viewer scopes (a viewer also reads users and keys), but no api-keys:write.
    const key = await createKey(app, owner.apiKey, [...new Set([...scopesForRole('member'), ...scopesForRole('viewer'), 'users:write'])]);
    const member = await addUser('member');
    expectError(await updateUser(key, member.id, { role: 'admin' }), 403, /^Cannot give a user the role admin: .*\(api-keys:write\)$/);
    expect((await app.db.users.findById(member.id).lean())!.role).toBe('member');
    // Demoting within its reach works.
    const demoted = await updateUser(key, member.id, { role: 'viewer' });
    expect({ status: demoted.statusCode, body: demoted.json() }).toMatchObject({ status: 200, body: { data: { role: 'viewer' } } });
  });

  test("no taking over a stronger user: a narrow key cannot set an admin's password, rename or delete them", async () => {
    const memberKey = await keyFor('member');
    const admin = await addUser('admin');
    const password = newPassword();
    expectError(await updateUser(memberKey, admin.id, { password }), 403, /^Cannot change a user with the role admin/);
    await expect(login(app, admin.email, password)).rejects.toThrow(/401/);
    expectError(await updateUser(memberKey, admin.id, { name: 'x' }), 403, /^Cannot change a user with the role admin/);
    expectError(await deleteUser(memberKey, admin.id), 403, /^Cannot delete a user with the role admin/);
    expect(await app.db.users.exists({ _id: admin.id })).not.toBeNull();
  });

  test('an admin session keeps managing admins (it holds every scope)', async () => {
    const admin = await addUser('admin');
    const other = await addUser('admin', admin.session);
    expect((await updateUser(admin.session, other.id, { role: 'member' })).statusCode).toBe(200);
    expect((await updateUser(admin.session, other.id, { role: 'admin' })).statusCode).toBe(200);
  });
});
