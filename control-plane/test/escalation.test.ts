import { createHash, randomBytes } from 'node:crypto';
import { Types } from 'mongoose';
import type { App } from '../src/app.js';
import { Messages, scopesForRole, type Role } from '@xfer/shared';
import { auth, buildTestApp, createAccount, createKey, expectError, login, type TestAccount } from './helper.js';
import { makeConnection } from './fixtures.js';

/**
 * No privilege gained through any door (docs/security.md "Escalation rules"). Walks every
 * registered route that changes something: each must appear in DOORS, either with a probe that
 * has a narrow caller try to obtain more than it holds through it, or marked as minting nothing
 * with the reason. A new non-GET route without an entry fails here until someone decides which
 * it is. GET routes are reads and mint nothing (a read request does no write).
 */
let app: App;
let owner: TestAccount;

beforeAll(async () => {
  app = await buildTestApp();
  owner = await createAccount(app, 'enterprise');
});
afterAll(() => app.close());

const newEmail = () => `esc-${randomBytes(4).toString('hex')}@example.test`;
const newPassword = () => `pw-${randomBytes(10).toString('hex')}`;
const call = (method: string, url: string, token: string, payload?: Record<string, unknown>) =>
  app.inject({ method: method as 'POST', url: `/api/v1${url}`, headers: auth(token), ...(payload ? { payload } : {}) });

/** A user of `role` created by the owner, signed in. */
async function userOf(role: Role) {
  const email = newEmail();
  const password = newPassword();
  const res = await call('POST', '/users', owner.apiKey, { email, role, password });
  if (res.statusCode !== 201) throw new Error(`userOf: ${res.statusCode} ${res.body}`);
  return { id: res.json().data.id as string, email, password, session: await login(app, email, password) };
}

/** A token minted by some route must not be a credential of the API: 401 on a route of every kind. */
async function expectNoApiAccess(token: string) {
  for (const url of ['/transfers', '/api-keys', '/users', '/connections']) expectError(await call('GET', url, token), 401, Messages.unauthenticated);
}

const fileRecord = async () => String((await app.db.files.create({
  account_id: new Types.ObjectId(owner.accountId), name: 'a.txt', name_lower: 'a.txt', path: '/', size: 1,
  mime_type: 'text/plain', sha256: '0'.repeat(64), storage_key: 'none', uploaded_by: { type: 'user', id: owner.userId },
}))._id);

/** A data room of the owner's. */
async function ownerRoom(): Promise<string> {
  const res = await call('POST', '/data-rooms', owner.apiKey, { name: 'esc' });
  if (res.statusCode !== 201) throw new Error(`ownerRoom: ${res.statusCode} ${res.body}`);
  return res.json().data.id as string;
}

/** A schedule of the owner's, over two connections of the account. */
async function ownerSchedule(): Promise<string> {
  const [src, dst] = [(await makeConnection(app, owner.apiKey, 'sftp')).id, (await makeConnection(app, owner.apiKey, 's3')).id];
  const res = await call('POST', '/schedules', owner.apiKey, { name: 'esc', cron: '0 2 * * *', active: false, transfer: { sourceConnectionId: src, sourcePath: '/a', destinationConnectionId: dst, destinationPath: '/b' } });
  if (res.statusCode !== 201) throw new Error(`ownerSchedule: ${res.statusCode} ${res.body}`);
  return res.json().data.id as string;
}

/** A key with schedules:write but not transfers:write is refused: it would run transfers through the schedule. */
async function expectNoScheduleWithout(method: string, url: string) {
  const narrow = await createKey(app, owner.apiKey, ['schedules:read', 'schedules:write', 'connections:read']);
  const payload = method === 'PUT' ? { active: true } : method === 'POST' && url === '/schedules' ? { name: 'x', cron: '* * * * *', transfer: { sourceConnectionId: 'a', sourcePath: '/', destinationConnectionId: 'b', destinationPath: '/' } } : undefined;
  expectError(await call(method, url, narrow, payload), 403, /needs transfers:write/);
}

/** A watcher of the owner's, over two connections of the account. */
async function ownerWatcher(): Promise<string> {
  const [src, dst] = [(await makeConnection(app, owner.apiKey, 'sftp')).id, (await makeConnection(app, owner.apiKey, 's3')).id];
  const res = await call('POST', '/watchers', owner.apiKey, { name: 'esc', connectionId: src, path: '/in', active: false, action: { transfer: { destinationConnectionId: dst, destinationPath: '/b' } } });
  if (res.statusCode !== 201) throw new Error(`ownerWatcher: ${res.statusCode} ${res.body}`);
  return res.json().data.id as string;
}

/** A key with watchers:write but not transfers:write is refused: it would run transfers through the watcher. */
async function expectNoWatcherWithout(method: string, url: string) {
  const narrow = await createKey(app, owner.apiKey, ['watchers:read', 'watchers:write', 'connections:read']);
  const payload = method === 'PUT' ? { active: true } : { name: 'x', connectionId: 'a', path: '/', action: { transfer: { destinationConnectionId: 'b', destinationPath: '/' } } };
  expectError(await call(method, url, narrow, payload), 403, /needs transfers:write/);
}

/** A workflow of the owner's: one transfer step over two connections of the account. */
async function ownerWorkflow(): Promise<string> {
  const [src, dst] = [(await makeConnection(app, owner.apiKey, 'sftp')).id, (await makeConnection(app, owner.apiKey, 's3')).id];
  const res = await call('POST', '/workflows', owner.apiKey, { name: 'esc', steps: [{ type: 'transfer', sourceConnectionId: src, sourcePath: '/a', destinationConnectionId: dst, destinationPath: '/b' }] });
  if (res.statusCode !== 201) throw new Error(`ownerWorkflow: ${res.statusCode} ${res.body}`);
  return res.json().data.id as string;
}

/** A key with workflows:write but not transfers:write is refused: it would run transfers (and move source files) through the workflow. */
async function expectNoWorkflowWithout(method: string, url: string) {
  const narrow = await createKey(app, owner.apiKey, ['workflows:read', 'workflows:write', 'connections:read']);
  const step = { type: 'transfer', sourceConnectionId: 'a', sourcePath: '/', destinationConnectionId: 'b', destinationPath: '/' };
  const payload = method === 'PUT' ? { name: 'y' } : url === '/workflows' ? { name: 'x', steps: [step] } : {};
  expectError(await call(method, url, narrow, payload), 403, /needs transfers:write/);
}

/** A schedule of the owner's that runs `workflowId`. */
async function ownerWorkflowSchedule(workflowId: string): Promise<string> {
  const res = await call('POST', '/schedules', owner.apiKey, { name: 'esc', cron: '0 2 * * *', active: false, workflowId });
  if (res.statusCode !== 201) throw new Error(`ownerWorkflowSchedule: ${res.statusCode} ${res.body}`);
  return res.json().data.id as string;
}

/**
 * A key that may run transfers but not workflows (schedules:write, watchers:write and
 * transfers:write) is refused automation bound to a workflow, made, changed or run: running the
 * workflow directly needs workflows:write.
 */
async function expectNoWorkflowAutomation(method: string, url: string, payload?: Record<string, unknown>) {
  const narrow = await createKey(app, owner.apiKey, ['schedules:read', 'schedules:write', 'watchers:read', 'watchers:write', 'transfers:write', 'connections:read', 'workflows:read']);
  expectError(await call(method, url, narrow, payload), 403, /of a workflow runs transfers: this needs transfers:write and workflows:write, which the calling key does not hold \(missing workflows:write\)$/);
}

/** The owner's webhook subscribed to user.login (sign-ins: emails, client addresses). */
async function ownerLoginHook(): Promise<string> {
  const res = await call('POST', '/webhooks', owner.apiKey, { url: 'https://8.8.8.8/hook', events: ['user.login'] });
  if (res.statusCode !== 201) throw new Error(`ownerLoginHook: ${res.statusCode} ${res.body}`);
  return res.json().data.id as string;
}

type Door = { probe: () => Promise<void> } | { mintsNothing: string };

const DOORS: Record<string, Door> = {
  'POST /api/v1/auth/login': {
    // A session holds its user's role and nothing more: a member signs in and still cannot mint keys or users.
    probe: async () => {
      const member = await userOf('member');
      expectError(await call('POST', '/api-keys', member.session, { name: 'x', scopes: ['files:read'] }), 403, /role \(member\)/);
      expectError(await call('POST', '/users', member.session, { email: newEmail(), role: 'viewer', password: newPassword() }), 403, /role \(member\)/);
    },
  },
  'POST /api/v1/api-keys': {
    probe: async () => {
      const narrow = await createKey(app, owner.apiKey, ['api-keys:write', 'files:read']);
      expectError(await call('POST', '/api-keys', narrow, { name: 'x', scopes: ['files:read', 'files:write'] }), 403, Messages.scopeEscalation);
      const expiring = await createKey(app, owner.apiKey, ['api-keys:write', 'files:read'], { expires_in_days: 1 });
      expectError(await call('POST', '/api-keys', expiring, { name: 'x', scopes: ['files:read'] }), 403, /^The calling key expires at /);
      expectError(await call('POST', '/api-keys', expiring, { name: 'x', scopes: ['files:read'], expires_in_days: 2 }), 403, /must expire no later/);
    },
  },
  'DELETE /api/v1/api-keys/:id': {
    probe: async () => {
      const narrow = await createKey(app, owner.apiKey, ['api-keys:read', 'api-keys:write']);
      const root = await app.db.apiKeys.findOne({ key_hash: createHash('sha256').update(owner.apiKey).digest('hex') }).lean();
      expectError(await call('DELETE', `/api-keys/${String(root!._id)}`, narrow), 403, /^Cannot revoke a key holding scopes the calling key does not hold/);
      expect((await call('GET', '/api-keys', owner.apiKey)).statusCode).toBe(200);
    },
  },
  'POST /api/v1/users': {
    probe: async () => {
      const usersOnly = await createKey(app, owner.apiKey, ['users:read', 'users:write']);
      for (const role of ['admin', 'member', 'viewer'] as const) {
        expectError(await call('POST', '/users', usersOnly, { email: newEmail(), role, password: newPassword() }), 403, new RegExp(`^Cannot create a user with the role ${role}`));
      }
      expectError(await call('POST', '/users', usersOnly, { email: newEmail(), role: 'owner', password: newPassword() }), 403, /Only an owner/);
    },
  },
  'PUT /api/v1/users/:id': {
    probe: async () => {
      const key = await createKey(app, owner.apiKey, [...new Set([...scopesForRole('member'), 'users:write'])]);
      const member = await userOf('member');
      const admin = await userOf('admin');
      expectError(await call('PUT', `/users/${member.id}`, key, { role: 'admin' }), 403, /^Cannot give a user the role admin/);
      expectError(await call('PUT', `/users/${admin.id}`, key, { password: newPassword() }), 403, /^Cannot change a user with the role admin/);
      expect((await app.db.users.findById(member.id).lean())!.role).toBe('member');
    },
  },
  'DELETE /api/v1/users/:id': {
    probe: async () => {
      const key = await createKey(app, owner.apiKey, [...new Set([...scopesForRole('member'), 'users:write'])]);
      const admin = await userOf('admin');
      expectError(await call('DELETE', `/users/${admin.id}`, key), 403, /^Cannot delete a user with the role admin/);
    },
  },
  'POST /api/v1/agents': {
    // An agent token authenticates only the agent socket (agents/connect.ts), never the API; an
    // agent made by a narrow key is pending: it serves no connection it is not pinned to, so it
    // carries no credential the key could not give it (docs/security.md "Agents: approval").
    probe: async () => {
      const key = await createKey(app, owner.apiKey, ['agents:write']);
      const res = await call('POST', '/agents', key, { name: `a-${new Types.ObjectId()}` });
      expect(res.statusCode).toBe(201);
      expect(res.json().data).toMatchObject({ approved: false, approved_at: null, approved_by: null });
      await expectNoApiAccess(res.json().data.token);
      const member = await userOf('member');
      const bySession = await call('POST', '/agents', member.session, { name: `a-${new Types.ObjectId()}` });
      expect(bySession.json().data).toMatchObject({ approved: false });
    },
  },
  'POST /api/v1/agents/:id/approve': {
    // Approving hands the agent every unpinned connection's credentials: an administrator's act.
    probe: async () => {
      const key = await createKey(app, owner.apiKey, ['agents:write']);
      const id = (await call('POST', '/agents', key, { name: `a-${new Types.ObjectId()}` })).json().data.id as string;
      expectError(await call('POST', `/agents/${id}/approve`, key), 403, /^Approving an agent needs an administrator .*: the calling key does not hold every scope$/);
      const member = await userOf('member');
      expectError(await call('POST', `/agents/${id}/approve`, member.session), 403, /^Approving an agent needs an administrator .*: your role \(member\) is neither owner nor admin$/);
      expect(await app.db.agents.countDocuments({ _id: new Types.ObjectId(id), approved: false })).toBe(1);
    },
  },
  'POST /api/v1/files/:id/share': {
    // A share link is a read credential: minting one needs files:read, and it reads only its file.
    probe: async () => {
      const fileId = await fileRecord();
      const writeOnly = await createKey(app, owner.apiKey, ['files:write']);
      expectError(await call('POST', `/files/${fileId}/share`, writeOnly, {}), 403, /^A share link lets anyone holding it download the file: creating one needs files:read/);
      expect(await app.db.shareLinks.countDocuments({ file_id: fileId })).toBe(0);
      const readWrite = await createKey(app, owner.apiKey, ['files:read', 'files:write']);
      const res = await call('POST', `/files/${fileId}/share`, readWrite, {});
      expect(res.statusCode).toBe(201);
      await expectNoApiAccess(res.json().data.token);
      // An expiring key's links end by its own end (the default link lives 24 h; this key 1 day from a moment ago).
      const expiring = await createKey(app, owner.apiKey, ['files:read', 'files:write'], { expires_in_days: 1 });
      expectError(await call('POST', `/files/${fileId}/share`, expiring, {}), 403, /^The calling key expires at .*: a share link it creates must expire no later/);
      expect((await call('POST', `/files/${fileId}/share`, expiring, { expires_in_hours: 23 })).statusCode).toBe(201);
    },
  },
  'POST /api/v1/webhooks': {
    // A subscription sends what its events carry to the caller's URL: it needs their read scopes.
    // The signing secret authenticates deliveries to that URL, nothing here.
    probe: async () => {
      const hooksOnly = await createKey(app, owner.apiKey, ['webhooks:write']);
      expectError(await call('POST', '/webhooks', hooksOnly, { url: 'https://8.8.8.8/hook', events: ['user.login', 'user.registered'] }), 403,
        /^Subscribing to user.login, user.registered sends what they carry to the subscriber: this needs users:read, which the calling key does not hold$/);
      const key = await createKey(app, owner.apiKey, ['webhooks:write', 'files:read']);
      expectError(await call('POST', '/webhooks', key, { url: 'https://8.8.8.8/hook', events: ['file.uploaded', 'data_room.member_added'] }), 403, /needs data-rooms:read/);
      const res = await call('POST', '/webhooks', key, { url: 'https://8.8.8.8/hook', events: ['file.uploaded'] });
      expect(res.statusCode).toBe(201);
      await expectNoApiAccess(res.json().data.secret);
    },
  },
  'PUT /api/v1/webhooks/:id': {
    // Saving a webhook chooses where its events go: pointing the owner's user.login webhook at another URL is reading sign-ins.
    probe: async () => {
      const hook = await ownerLoginHook();
      const key = await createKey(app, owner.apiKey, ['webhooks:write', 'files:read']);
      expectError(await call('PUT', `/webhooks/${hook}`, key, { url: 'https://8.8.4.4/mine' }), 403, /^Subscribing to user.login .*needs users:read/);
      expectError(await call('PUT', `/webhooks/${hook}`, key, { events: ['user.registered'] }), 403, /needs users:read/);
      expect((await app.db.webhooks.findById(hook).lean())!.url).toBe('https://8.8.8.8/hook');
    },
  },
  'PUT /api/v1/settings/mfa': {
    // Enrolment is console-only and for the signed-in user alone: no key reaches it, and it changes no role.
    probe: async () => {
      expectError(await call('PUT', '/settings/mfa', owner.apiKey, { enabled: true }), 403, Messages.consoleOnly);
      const viewer = await userOf('viewer');
      const res = await call('PUT', '/settings/mfa', viewer.session, { enabled: true });
      expect(res.statusCode).toBe(200);
      await expectNoApiAccess(res.json().data.secret);
      expectError(await call('POST', '/users', viewer.session, { email: newEmail(), role: 'viewer', password: newPassword() }), 403, /role \(viewer\)/);
    },
  },
  'POST /api/v1/settings/mfa/verify': { mintsNothing: 'turns on the caller\'s own pending enrolment (PUT /settings/mfa is the door)' },
  'PUT /api/v1/settings/service-principals': {
    // Registering principals is an owner/admin decision: a member session and every key are refused.
    probe: async () => {
      const body = { service_principals: [{ name: 'ci', client_id: 'c1' }] };
      expectError(await call('PUT', '/settings/service-principals', owner.apiKey, body), 403, Messages.consoleOnly);
      const member = await userOf('member');
      expect((await call('PUT', '/settings/service-principals', member.session, body)).statusCode).toBe(403);
    },
  },
  'DELETE /api/v1/settings/sessions': { mintsNothing: 'ends the caller\'s own sessions' },
  'PUT /api/v1/settings/avatar': { mintsNothing: 'an image of the caller\'s own' },
  'PUT /api/v1/settings/retention': { mintsNothing: 'retention periods; owner/admin only' },
  'PUT /api/v1/settings/plan': {
    // A plan unlocks features (API keys, webhooks), so only an owner's session moves it.
    probe: async () => {
      expectError(await call('PUT', '/settings/plan', owner.apiKey, { plan: 'enterprise' }), 403, Messages.consoleOnly);
      for (const role of ['admin', 'member', 'viewer'] as const) {
        const user = await userOf(role);
        expectError(await call('PUT', '/settings/plan', user.session, { plan: 'enterprise' }), 403, `Only an owner can change the plan; your role is ${role}`);
      }
    },
  },
  'POST /api/v1/connections': { mintsNothing: 'stores credentials for another system, sealed and write-only; none for this API' },
  'PUT /api/v1/connections/:id': { mintsNothing: 'as POST /connections' },
  'DELETE /api/v1/connections/:id': { mintsNothing: 'removes' },
  'POST /api/v1/connections/:id/test': { mintsNothing: 'a reachability test' },
  'PUT /api/v1/agents/:id': {
    // An approved agent's labels (its pools) and job limit (how much work it wins) decide whose
    // credentials it receives: an administrator's; its name stays agents:write.
    probe: async () => {
      const key = await createKey(app, owner.apiKey, ['agents:write']);
      const id = (await call('POST', '/agents', owner.apiKey, { name: `a-${new Types.ObjectId()}` })).json().data.id as string;
      expectError(await call('PUT', `/agents/${id}`, key, { labels: ['fra1'] }), 403, /^Changing labels of an approved agent needs an administrator/);
      expectError(await call('PUT', `/agents/${id}`, key, { labels: ['fra1'], max_jobs: 50 }), 403, /^Changing labels and max_jobs of an approved agent needs an administrator/);
      expect(await app.db.agents.findById(id, { labels: 1, job_limit: 1 }).lean()).toMatchObject({ labels: [], job_limit: null });
      expect((await call('PUT', `/agents/${id}`, key, { name: `b-${new Types.ObjectId()}` })).statusCode).toBe(200);
    },
  },
  'DELETE /api/v1/agents/:id': { mintsNothing: 'revokes an agent token' },
  'POST /api/v1/agents/:id/test': { mintsNothing: 'a ping' },
  'POST /api/v1/transfers': { mintsNothing: 'a job over connections of the account' },
  'POST /api/v1/transfers/:id/execute': { mintsNothing: 'runs a job' },
  'POST /api/v1/transfers/:id/plan': { mintsNothing: 'lists both connections of a job on one of the account\'s agents, writes nothing' },
  'POST /api/v1/transfers/:id/cancel': { mintsNothing: 'stops a job' },
  'POST /api/v1/transfers/:id/retry': { mintsNothing: 'runs a job again' },
  'DELETE /api/v1/transfers/:id': { mintsNothing: 'removes' },
  'DELETE /api/v1/files/:id': { mintsNothing: 'removes' },
  'POST /api/v1/files/upload': { mintsNothing: 'stores a file' },
  'DELETE /api/v1/files/:id/share/:share_id': { mintsNothing: 'revokes a share link' },
  'DELETE /api/v1/webhooks/:id': { mintsNothing: 'removes' },
  'POST /api/v1/webhooks/:id/test': { mintsNothing: 'sends a test event to the webhook\'s own URL' },
  'POST /api/v1/parameters': { mintsNothing: 'a value for path templates; a secret one is sealed and write-only, and cannot go into a path' },
  'PUT /api/v1/parameters/:id': { mintsNothing: 'as POST /parameters; a secret is made plain only with a new value, so it is never revealed' },
  'DELETE /api/v1/parameters/:id': { mintsNothing: 'removes' },
  // A schedule runs transfers later, as the system: making, changing or running one needs transfers:write too.
  // Bound to a workflow, it also needs workflows:write, as running the workflow directly does.
  'POST /api/v1/schedules': {
    probe: async () => {
      await expectNoScheduleWithout('POST', '/schedules');
      await expectNoWorkflowAutomation('POST', '/schedules', { name: 'x', cron: '0 2 * * *', workflowId: await ownerWorkflow() });
    },
  },
  'PUT /api/v1/schedules/:id': {
    probe: async () => {
      await expectNoScheduleWithout('PUT', `/schedules/${await ownerSchedule()}`);
      await expectNoWorkflowAutomation('PUT', `/schedules/${await ownerSchedule()}`, { workflowId: await ownerWorkflow() });
      await expectNoWorkflowAutomation('PUT', `/schedules/${await ownerWorkflowSchedule(await ownerWorkflow())}`, { name: 'mine now' });
    },
  },
  'POST /api/v1/schedules/:id/run': {
    probe: async () => {
      await expectNoScheduleWithout('POST', `/schedules/${await ownerSchedule()}/run`);
      const schedule = await ownerWorkflowSchedule(await ownerWorkflow());
      await expectNoWorkflowAutomation('POST', `/schedules/${schedule}/run`);
      expect(await app.db.scheduleRuns.countDocuments({ schedule_id: new Types.ObjectId(schedule) })).toBe(0);
    },
  },
  'DELETE /api/v1/schedules/:id': { mintsNothing: 'removes' },
  'POST /api/v1/watchers': {
    probe: async () => {
      await expectNoWatcherWithout('POST', '/watchers');
      const src = (await makeConnection(app, owner.apiKey, 'sftp')).id;
      await expectNoWorkflowAutomation('POST', '/watchers', { name: 'x', connectionId: src, path: '/in', action: { workflowId: await ownerWorkflow() } });
    },
  },
  'PUT /api/v1/watchers/:id': {
    probe: async () => {
      await expectNoWatcherWithout('PUT', `/watchers/${await ownerWatcher()}`);
      await expectNoWorkflowAutomation('PUT', `/watchers/${await ownerWatcher()}`, { action: { workflowId: await ownerWorkflow() } });
    },
  },
  'DELETE /api/v1/watchers/:id': { mintsNothing: 'removes' },
  // A workflow runs transfers and moves source files: making, changing or running one needs transfers:write too.
  'POST /api/v1/workflows': { probe: async () => expectNoWorkflowWithout('POST', '/workflows') },
  'PUT /api/v1/workflows/:id': { probe: async () => expectNoWorkflowWithout('PUT', `/workflows/${await ownerWorkflow()}`) },
  'POST /api/v1/workflows/:id/run': { probe: async () => expectNoWorkflowWithout('POST', `/workflows/${await ownerWorkflow()}/run`) },
  'DELETE /api/v1/workflows/:id': { mintsNothing: 'removes' },
  'POST /api/v1/workflow-runs/:id/cancel': { mintsNothing: 'stops a run' },
  // Data rooms open files to outside parties: what goes in and who is let in is bounded by what the caller may do with files.
  'POST /api/v1/data-rooms': { mintsNothing: 'an empty room; files and members are checked where they are added' },
  'PUT /api/v1/data-rooms/:id': { mintsNothing: "a room's name, description and end; an expiring key's invites carry their own end" },
  'DELETE /api/v1/data-rooms/:id': { mintsNothing: 'closes a room: every invite answers 410' },
  'DELETE /api/v1/data-rooms/:id/files/:file_id': { mintsNothing: 'takes a file out of a room' },
  'DELETE /api/v1/data-rooms/:id/members/:member_id': { mintsNothing: 'revokes an invite' },
  'POST /api/v1/data-rooms/:id/files': {
    // The room's members download what is in it: putting a file there passes on a read of it.
    probe: async () => {
      const room = await ownerRoom();
      const roomsOnly = await createKey(app, owner.apiKey, ['data-rooms:read', 'data-rooms:write']);
      expectError(await call('POST', `/data-rooms/${room}/files`, roomsOnly, { file_id: await fileRecord() }), 403, /needs files:read/);
      expect(await app.db.dataRoomFiles.countDocuments({ room_id: new Types.ObjectId(room) })).toBe(0);
    },
  },
  'POST /api/v1/data-rooms/:id/upload': {
    probe: async () => {
      const room = await ownerRoom();
      const readOnly = await createKey(app, owner.apiKey, ['data-rooms:write', 'files:read']);
      const boundary = 'esc-boundary';
      const payload = `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.txt"\r\n\r\na\r\n--${boundary}--\r\n`;
      const res = await app.inject({ method: 'POST', url: `/api/v1/data-rooms/${room}/upload`, headers: { ...auth(readOnly), 'content-type': `multipart/form-data; boundary=${boundary}` }, payload });
      expectError(res, 403, /missing files:write/);
    },
  },
  'POST /api/v1/data-rooms/:id/members': {
    // An invite is a credential: a viewer's reads the room's files, a contributor's also writes into the store.
    probe: async () => {
      const room = await ownerRoom();
      const roomsOnly = await createKey(app, owner.apiKey, ['data-rooms:write']);
      expectError(await call('POST', `/data-rooms/${room}/members`, roomsOnly, { email: newEmail(), role: 'viewer' }), 403, /needs files:read/);
      const reader = await createKey(app, owner.apiKey, ['data-rooms:write', 'files:read']);
      expectError(await call('POST', `/data-rooms/${room}/members`, reader, { email: newEmail(), role: 'contributor' }), 403, /missing files:write/);
      const expiring = await createKey(app, owner.apiKey, ['data-rooms:write', 'files:read'], { expires_in_days: 1 });
      expectError(await call('POST', `/data-rooms/${room}/members`, expiring, { email: newEmail(), role: 'viewer' }), 403, /^The calling key expires at .*data room invite/);
      const res = await call('POST', `/data-rooms/${room}/members`, reader, { email: newEmail(), role: 'viewer' });
      expect(res.statusCode).toBe(201);
      await expectNoApiAccess(res.json().data.token);
    },
  },
  'POST /api/v1/rooms/:token/upload': {
    // A viewer's invite reads the room and nothing more.
    probe: async () => {
      const room = await ownerRoom();
      const viewer = (await call('POST', `/data-rooms/${room}/members`, owner.apiKey, { email: newEmail(), role: 'viewer' })).json().data;
      const boundary = 'esc-boundary';
      const payload = `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.txt"\r\n\r\na\r\n--${boundary}--\r\n`;
      const res = await app.inject({ method: 'POST', url: `${viewer.invite_url}/upload`, headers: { 'content-type': `multipart/form-data; boundary=${boundary}` }, payload });
      expectError(res, 403, /not upload/);
    },
  },
  'PUT /api/v1/notifications/settings': {
    // The recipients receive what the events carry: the list needs their read scopes. The SMTP password is write-only and sent only to the host and user it was given with.
    probe: async () => {
      const key = await createKey(app, owner.apiKey, ['notifications:read', 'notifications:write', 'transfers:read']);
      const body = (events: string[]) => ({ email: { enabled: false, recipients: ['esc@example.test'] }, events });
      expectError(await call('PUT', '/notifications/settings', key, body(['transfer.failed', 'user.registered', 'data_room.created'])), 403,
        /^Subscribing to user.registered, data_room.created .*needs data-rooms:read, users:read, which the calling key does not hold$/);
      expect((await call('PUT', '/notifications/settings', key, body(['transfer.failed']))).statusCode).toBe(200);
    },
  },
  'POST /api/v1/notifications/test': { mintsNothing: 'sends a test email to the account\'s own recipients' },
};

describe('every door that changes something is classified', () => {
  const changing = () => app.apiRoutes.filter((r) => r.method !== 'GET').map((r) => `${r.method} ${r.url}`);

  test('each non-GET route has an entry, and each entry a route', () => {
    expect(changing().filter((r) => !(r in DOORS))).toEqual([]);
    expect(Object.keys(DOORS).filter((d) => !changing().includes(d))).toEqual([]);
  });

  test('through every minting door, a narrow caller obtains no more than it holds', async () => {
    const probes = changing().filter((r) => DOORS[r] && 'probe' in DOORS[r]!);
    expect(probes.length).toBeGreaterThanOrEqual(10);
    for (const route of probes) {
      try {
        await (DOORS[route] as { probe: () => Promise<void> }).probe();
      } catch (err) {
        throw new Error(`${route}: ${(err as Error).message}`, { cause: err });
      }
    }
  });
});
