import { Types } from 'mongoose';
import type { App } from '../src/app.js';
import { auth, buildTestApp, createAccount, createKey, expectError, type TestAccount } from './helper.js';
import { getTransfer, makeAgent, makeConnection, makeTransfer, transferAction, uniqueName } from './fixtures.js';
import { ProtocolClient } from './protocol-client.js';
import { Messages } from '@xfer/shared';

/** The transfers API without a running job: input, listing, state rules, choice of agent. */
let app: App;
let owner: TestAccount;
let stranger: TestAccount;
let sftp: { id: string; name: string };
let s3: { id: string; name: string };

beforeAll(async () => {
  app = await buildTestApp({ dispatchPollMs: 50 });
  // This control plane does not relay: connections pinned to two agents are refused (pools.test.ts has relays).
  app.dispatcher.relayWith(null);
  await app.listen({ host: '127.0.0.1', port: 0 });
  owner = await createAccount(app);
  stranger = await createAccount(app);
  sftp = await makeConnection(app, owner.apiKey, 'sftp');
  s3 = await makeConnection(app, owner.apiKey, 's3');
});
afterAll(() => app.close());

const post = (payload: Record<string, unknown>, token = owner.apiKey) =>
  app.inject({ method: 'POST', url: '/api/v1/transfers', headers: auth(token), payload });
const valid = () => ({ name: uniqueName('job'), sourceConnectionId: sftp.id, sourcePath: '/in', destinationConnectionId: s3.id, destinationPath: '/out' });

const FIELDS = [
  'agent_id', 'attempt', 'attempts', 'bytes_transferred', 'completed_at', 'created_at', 'cutoff', 'destinationConnectionId', 'destinationPath', 'error',
  'files_deleted', 'files_failed', 'files_skipped', 'files_total', 'files_transferred', 'id', 'last_interruption', 'mode', 'name', 'options',
  'queue_position', 'queued_at', 'sourceConnectionId', 'sourcePath', 'source_agent_id', 'started_at', 'status', 'takeovers', 'updated_at',
];

describe('POST /transfers', () => {
  test('creates a queued job with the default options and normalized paths', async () => {
    const body = { ...valid(), sourcePath: '/in//data/./x/', destinationPath: '/out/' };
    const res = await post(body);
    expect(res.statusCode).toBe(201);
    const { data } = res.json();
    expect(Object.keys(data).sort()).toEqual(FIELDS);
    expect(data).toMatchObject({
      name: body.name, sourceConnectionId: sftp.id, sourcePath: '/in/data/x', destinationConnectionId: s3.id, destinationPath: '/out',
      options: { overwrite: 'if_changed', verify: 'checksum', concurrency: 8, mode: 'copy', compare: 'size_mtime', cutoff: 'hard' }, status: 'queued', attempt: 1,
      files_total: 0, files_transferred: 0, files_skipped: 0, files_failed: 0, files_deleted: 0, bytes_transferred: 0, cutoff: null,
      started_at: null, completed_at: null, error: null, agent_id: null,
      mode: null, source_agent_id: null, attempts: 1, queued_at: null, queue_position: null, takeovers: 0, last_interruption: null,
    });
    const audit = await app.db.auditEvents.findOne({ action: 'transfer.create', 'resource.id': data.id }).lean();
    expect(audit).toMatchObject({ outcome: 'success', actor: { type: 'api_key' } });
  });

  test('takes the given options', async () => {
    const res = await post({ ...valid(), options: { overwrite: 'never', verify: 'size', concurrency: 64 } });
    expect(res.json().data.options).toEqual({ overwrite: 'never', verify: 'size', concurrency: 64, mode: 'copy', compare: 'size_mtime', cutoff: 'hard' });
  });

  test.each([
    ['name', /^body\.name is required$/],
    ['sourceConnectionId', /^body\.sourceConnectionId is required$/],
    ['sourcePath', /^body\.sourcePath is required$/],
    ['destinationConnectionId', /^body\.destinationConnectionId is required$/],
    ['destinationPath', /^body\.destinationPath is required$/],
  ])('without %s: 400 naming it', async (field, message) => {
    const body: Record<string, unknown> = valid();
    delete body[field];
    expectError(await post(body), 400, message);
  });

  test.each([
    [{ sourcePath: 'in' }, "body.sourcePath must start with '/'"],
    [{ sourcePath: '/a/../etc' }, "body.sourcePath must not contain '..' segments"],
    [{ destinationPath: '/a\\b' }, 'body.destinationPath must not contain backslashes'],
    [{ destinationPath: '/a\u0000b' }, 'body.destinationPath must not contain NUL or control characters'],
    [{ sourcePath: '' }, 'body.sourcePath must not be empty'],
    [{ name: '   ' }, 'body.name has an invalid format'],
    [{ options: { concurrency: 0 } }, 'body.options.concurrency must be >= 1'],
    [{ options: { concurrency: 65 } }, 'body.options.concurrency must be <= 64'],
    [{ options: { overwrite: 'sometimes' } }, 'body.options.overwrite must be one of: always, if_changed, never'],
    [{ options: { verify: 'md5' } }, 'body.options.verify must be one of: checksum, size'],
    [{ options: { retries: 3 } }, "body.options has unknown field 'retries'"],
    [{ priority: 1 }, "body has unknown field 'priority'"],
    [{ sourcePath: 7 }, 'body.sourcePath must be string'],
  ])('%j: 400 %s', async (change, message) => {
    expectError(await post({ ...valid(), ...change }), 400, message);
  });

  test('a body that is not JSON is 400', async () => {
    const res = await app.inject({ method: 'POST', url: '/api/v1/transfers', headers: { ...auth(owner.apiKey), 'content-type': 'application/json' }, payload: '{"name":' });
    expectError(res, 400, 'Request body is not valid JSON');
  });

  test('unknown, malformed and other accounts\' connections are 404 naming which', async () => {
    const theirs = await makeConnection(app, stranger.apiKey, 'sftp');
    const missing = String(new Types.ObjectId());
    expectError(await post({ ...valid(), sourceConnectionId: missing }), 404, `Source connection ${missing} not found (body.sourceConnectionId)`);
    expectError(await post({ ...valid(), destinationConnectionId: theirs.id }), 404, `Destination connection ${theirs.id} not found (body.destinationConnectionId)`);
    expectError(await post({ ...valid(), sourceConnectionId: 'nope' }), 404, /^Source connection nope not found/);
  });
});

describe('GET /transfers', () => {
  test('lists the account\'s jobs newest first, filtered by status, with cursor paging', async () => {
    const account = await createAccount(app);
    const a = await makeConnection(app, account.apiKey, 'sftp');
    const b = await makeConnection(app, account.apiKey, 's3');
    const jobs = [];
    for (let i = 0; i < 3; i++) jobs.push(await makeTransfer(app, account.apiKey, a.id, b.id));
    await transferAction(app, account.apiKey, jobs[1]!.id, 'cancel');
    const list = async (query: string) => (await app.inject({ method: 'GET', url: `/api/v1/transfers${query}`, headers: auth(account.apiKey) })).json();
    expect((await list('')).data.map((j: { id: string }) => j.id)).toEqual([jobs[2]!.id, jobs[1]!.id, jobs[0]!.id]);
    expect((await list('?status=queued')).data.map((j: { id: string }) => j.id)).toEqual([jobs[2]!.id, jobs[0]!.id]);
    expect((await list('?status=cancelled')).data.map((j: { id: string }) => j.id)).toEqual([jobs[1]!.id]);
    const first = await list('?limit=2');
    expect(first.data).toHaveLength(2);
    const rest = await list(`?limit=2&cursor=${first.next_cursor}`);
    expect(rest).toEqual({ data: [expect.objectContaining({ id: jobs[0]!.id })], next_cursor: null });
    const bad = await app.inject({ method: 'GET', url: '/api/v1/transfers?status=running', headers: auth(account.apiKey) });
    expectError(bad, 400, /querystring\.status must be one of/);
  });

  test('reads need transfers:read; another account\'s job is 404', async () => {
    const job = await makeTransfer(app, owner.apiKey, sftp.id, s3.id);
    const writer = await createKey(app, owner.apiKey, ['transfers:write']);
    expectError(await app.inject({ method: 'GET', url: `/api/v1/transfers/${job.id}`, headers: auth(writer) }), 403, Messages.missingScope);
    expectError(await app.inject({ method: 'GET', url: `/api/v1/transfers/${job.id}`, headers: auth(stranger.apiKey) }), 404, `Transfer ${job.id} not found`);
  });
});

describe('state rules without an agent', () => {
  test('execute with no online agent: 503 naming the connections, the job stays queued', async () => {
    const job = await makeTransfer(app, owner.apiKey, sftp.id, s3.id);
    const res = await transferAction(app, owner.apiKey, job.id, 'execute');
    expectError(res, 503, `No online agent can serve connections '${sftp.name}' and '${s3.name}' (needs sftp and s3 connectors)`);
    expect((await getTransfer(app, owner.apiKey, job.id)).status).toBe('queued');
  });

  test('execute on a connection pinned to an offline agent: 503 naming both', async () => {
    const agent = await makeAgent(app, owner.apiKey);
    const pinned = await makeConnection(app, owner.apiKey, 'sftp', { agent_id: agent.id });
    const job = await makeTransfer(app, owner.apiKey, pinned.id, s3.id);
    expectError(await transferAction(app, owner.apiKey, job.id, 'execute'), 503, `Agent '${agent.name}', which serves connection '${pinned.name}', is offline`);
  });

  test('connections pinned to two different agents: 409', async () => {
    const [a, b] = [await makeAgent(app, owner.apiKey), await makeAgent(app, owner.apiKey)];
    const src = await makeConnection(app, owner.apiKey, 'sftp', { agent_id: a.id });
    const dst = await makeConnection(app, owner.apiKey, 's3', { agent_id: b.id });
    const job = await makeTransfer(app, owner.apiKey, src.id, dst.id);
    expectError(await transferAction(app, owner.apiKey, job.id, 'execute'), 409,
      `Connection '${src.name}' is served by agent '${a.name}' and connection '${dst.name}' by agent '${b.name}': no agent serves both ends and relays are unavailable; let one agent serve both (agent_id or agent_pool)`);
    expect((await getTransfer(app, owner.apiKey, job.id)).status).toBe('queued');
  });

  test('an online agent lacking a connector type is not chosen', async () => {
    const account = await createAccount(app);
    const agent = await makeAgent(app, account.apiKey);
    const { client } = await ProtocolClient.connect(app, agent.token, { connector_types: ['sftp'] });
    const a = await makeConnection(app, account.apiKey, 'sftp');
    const b = await makeConnection(app, account.apiKey, 'webdav');
    const job = await makeTransfer(app, account.apiKey, a.id, b.id);
    expectError(await transferAction(app, account.apiKey, job.id, 'execute'), 503, /needs sftp and webdav connectors/);
    client.close();
    await client.closed;
  });

  test('a deleted connection: execute is 409', async () => {
    const doomed = await makeConnection(app, owner.apiKey, 'sftp');
    const job = await makeTransfer(app, owner.apiKey, doomed.id, s3.id);
    await app.inject({ method: 'DELETE', url: `/api/v1/connections/${doomed.id}`, headers: auth(owner.apiKey) });
    expectError(await transferAction(app, owner.apiKey, job.id, 'execute'), 409, `The source connection ${doomed.id} of this transfer was deleted; it cannot run`);
  });

  test('cancel a queued job: cancelled, event transfer.failed with status cancelled; cancel again 409', async () => {
    const job = await makeTransfer(app, owner.apiKey, sftp.id, s3.id);
    const res = await transferAction(app, owner.apiKey, job.id, 'cancel');
    expect(res.statusCode).toBe(200);
    expect(res.json().data).toMatchObject({ id: job.id, status: 'cancelled', error: null });
    expect(res.json().data.completed_at).not.toBeNull();
    const events = await app.db.outboxEvents.find({ 'data.id': job.id }).lean();
    expect(events.map((e) => [e.type, e.data.status])).toEqual([['transfer.failed', 'cancelled']]);
    expectError(await transferAction(app, owner.apiKey, job.id, 'cancel'), 409, `Transfer ${job.id} is cancelled; only queued or in-progress transfers can be cancelled`);
    expectError(await transferAction(app, owner.apiKey, job.id, 'execute'), 409, new RegExp(`only queued transfers can be executed \\(POST /transfers/${job.id}/retry`));
  });

  test('delete: a queued job is 409; a cancelled one goes, with its file records; then 404', async () => {
    const job = await makeTransfer(app, owner.apiKey, sftp.id, s3.id);
    const del = () => app.inject({ method: 'DELETE', url: `/api/v1/transfers/${job.id}`, headers: auth(owner.apiKey) });
    expectError(await del(), 409, `Transfer ${job.id} is queued; only completed, failed or cancelled transfers can be deleted`);
    await transferAction(app, owner.apiKey, job.id, 'cancel');
    await app.db.transferFiles.create({ account_id: owner.accountId, job_id: job.id, attempt: 1, path: 'a', status: 'copied', size: 1 });
    expect((await del()).json()).toEqual({ data: { id: job.id, deleted: true } });
    expect(await app.db.transferFiles.countDocuments({ job_id: new Types.ObjectId(job.id) })).toBe(0);
    expectError(await del(), 404);
    const actions = (await app.db.auditEvents.find({ 'resource.id': job.id }).lean()).map((e) => e.action);
    expect(actions).toEqual(['transfer.create', 'transfer.cancel', 'transfer.delete']);
  });

  test('retry: only failed or cancelled jobs (409 otherwise); back to queued as the next attempt', async () => {
    const job = await makeTransfer(app, owner.apiKey, sftp.id, s3.id);
    expectError(await transferAction(app, owner.apiKey, job.id, 'retry'), 409, `Transfer ${job.id} is queued; only failed or cancelled transfers can be retried`);
    await transferAction(app, owner.apiKey, job.id, 'cancel');
    const res = await transferAction(app, owner.apiKey, job.id, 'retry');
    expect(res.json().data).toMatchObject({ status: 'queued', attempt: 2, completed_at: null, error: null });
  });

  test.each(['execute', 'cancel', 'retry', 'delete', 'files'])('%s: unknown, malformed and other accounts\' ids are 404', async (action) => {
    const job = await makeTransfer(app, owner.apiKey, sftp.id, s3.id);
    for (const [id, key] of [[job.id, stranger.apiKey], ['zzz', owner.apiKey], [String(new Types.ObjectId()), owner.apiKey]] as const) {
      const res = action === 'delete'
        ? await app.inject({ method: 'DELETE', url: `/api/v1/transfers/${id}`, headers: auth(key) })
        : action === 'files'
          ? await app.inject({ method: 'GET', url: `/api/v1/transfers/${id}/files`, headers: auth(key) })
          : await transferAction(app, key, id, action);
      expectError(res, 404, `Transfer ${id} not found`);
    }
    expect((await getTransfer(app, owner.apiKey, job.id)).status).toBe('queued');
  });

  test('execute: a bad or unknown query parameter is 400', async () => {
    const job = await makeTransfer(app, owner.apiKey, sftp.id, s3.id);
    expectError(await transferAction(app, owner.apiKey, job.id, 'execute', '?wait=maybe'), 400, /querystring\.wait must be boolean/);
    expectError(await transferAction(app, owner.apiKey, job.id, 'execute', '?now=1'), 400, /unknown field 'now'/);
  });
});
