import { Types } from 'mongoose';
import type { App } from '../src/app.js';
import { auth, buildTestApp, createAccount, createKey, expectError } from './helper.js';
import { getTransfer, makeAgent, makeConnection } from './fixtures.js';
import { eventually, ProtocolClient } from './protocol-client.js';
import type { StoredWatcher, StoredWatcherEvent } from '../src/plugins/app/watchers/index.js';
import { FOUND_BURST } from '../src/plugins/app/watchers/watcher-events.js';
import { CloseCodes, MAX_FOUND_PER_REPORT, MAX_POLL_DURATION_MS } from '@xfer/shared';

/**
 * Watchers on the control plane (issue 15): the API, which agent polls a watcher and what it is
 * told (`watch.set`), and what its reports do (`watch.found`: one event and one transfer per file
 * version, whoever reports it how often; `watch.polled`). The agents are fake (ProtocolClient);
 * the agent's poller is tested in agent/test/, the whole loop with real agents and servers in e2e.
 */
let app: App;

beforeAll(async () => {
  app = await buildTestApp({ dispatchPollMs: 50, agentHeartbeatMs: 200 });
  await app.listen({ host: '127.0.0.1', port: 0 });
});
afterAll(() => app.close());

type WatcherBody = Record<string, unknown>;
const post = (key: string, payload: WatcherBody) => app.inject({ method: 'POST', url: '/api/v1/watchers', headers: auth(key), payload });
const put = (key: string, id: string, payload: WatcherBody) => app.inject({ method: 'PUT', url: `/api/v1/watchers/${id}`, headers: auth(key), payload });
const get = (key: string, url: string) => app.inject({ method: 'GET', url: `/api/v1${url}`, headers: auth(key) });

/** An account with an sftp source and an s3 destination, and a watcher body over them. */
async function setup() {
  const account = await createAccount(app);
  const key = account.apiKey;
  const src = await makeConnection(app, key, 'sftp');
  const dst = await makeConnection(app, key, 's3');
  const body = (over: WatcherBody = {}): WatcherBody => ({
    name: `inbox ${new Types.ObjectId()}`, connectionId: src.id, path: '/inbox', pattern: '*.csv', poll_interval_seconds: 10, stable_seconds: 3,
    action: { transfer: { destinationConnectionId: dst.id, destinationPath: '/archive/{{date:YYYY-MM-DD}}' } }, ...over,
  });
  return { account, key, src, dst, body };
}

type WatchSet = Awaited<ReturnType<ProtocolClient['next']>> & { payload: { watchers: Array<Record<string, unknown> & { id: string; revision: number }> } };
/** The newest `watch.set` the fake agent received, once one satisfies `ok`. */
async function setWhere(client: ProtocolClient, ok: (ids: string[], set: WatchSet['payload']) => boolean, what: string): Promise<WatchSet['payload']> {
  let last: WatchSet['payload'] | null = null;
  await eventually(async () => {
    const sets = client.all('watch.set');
    last = sets.length > 0 ? (sets[sets.length - 1]!.payload as WatchSet['payload']) : null;
    return last !== null && ok(last.watchers.map((w) => w.id), last);
  }, what);
  return last!;
}

const file = (path: string, version = `size:10:mtime:${path}`) => ({ path, name: path.slice(path.lastIndexOf('/') + 1), size: 10, version, modified_at: new Date().toISOString() });
const acks = (client: ProtocolClient) => client.all('ack').flatMap((m) => m.payload.seqs);

describe('the API', () => {
  test('create, get, list, update, delete; defaults; the revision grows only when what is watched changes', async () => {
    const s = await setup();
    const res = await post(s.key, s.body({ pattern: undefined, poll_interval_seconds: undefined, stable_seconds: undefined }));
    expect(res.statusCode).toBe(201);
    const w = res.json().data;
    expect(w).toMatchObject({
      connectionId: s.src.id, path: '/inbox', pattern: '*', recursive: false, poll_interval_seconds: 60, stable_seconds: 10, include_existing: false, active: true,
      action: { transfer: { destinationConnectionId: s.dst.id, destinationPath: '/archive/{{date:YYYY-MM-DD}}', options: { overwrite: 'if_changed', verify: 'checksum' } }, workflowId: null },
      agent_id: null, last_poll_at: null,
    });
    expect((await get(s.key, `/watchers/${w.id}`)).json().data).toEqual(w);
    expect((await get(s.key, '/watchers')).json().data.map((x: { id: string }) => x.id)).toContain(w.id);
    const revision = async () => (await app.db.watchers.findById(w.id).lean())!.revision;
    expect((await put(s.key, w.id, { name: 'renamed', poll_interval_seconds: 30 })).json().data).toMatchObject({ name: 'renamed', poll_interval_seconds: 30, pattern: '*' });
    expect(await revision()).toBe(1);
    expect((await put(s.key, w.id, { pattern: '*.txt' })).json().data.pattern).toBe('*.txt');
    expect(await revision()).toBe(2);
    const audit = await app.db.auditEvents.find({ action: { $in: ['watcher.create', 'watcher.update'] }, 'resource.id': w.id }).lean();
    expect(audit.map((a) => a.action).sort()).toEqual(['watcher.create', 'watcher.update', 'watcher.update']);
    expect((await app.inject({ method: 'DELETE', url: `/api/v1/watchers/${w.id}`, headers: auth(s.key) })).json().data).toEqual({ id: w.id, deleted: true });
    expectError(await get(s.key, `/watchers/${w.id}`), 404, `Watcher ${w.id} not found`);
  });

  test('every bad input is a 400 naming the field, and stores nothing', async () => {
    const s = await setup();
    await app.inject({ method: 'POST', url: '/api/v1/parameters', headers: auth(s.key), payload: { name: 'hidden', value: 'x', secret: true } });
    const cases: Array<[WatcherBody, RegExp]> = [
      [{ poll_interval_seconds: 9 }, /^poll_interval_seconds must be a whole number from 10 to 86400/],
      [{ poll_interval_seconds: 86_401 }, /^poll_interval_seconds must be a whole number from 10/],
      [{ stable_seconds: -1 }, /^stable_seconds must be a whole number from 0 to 86400/],
      [{ pattern: 'a/*.csv' }, /^pattern matches file names and cannot contain "\/"/],
      [{ pattern: '+(a|b).csv' }, /^pattern uses an extended glob/],
      [{ path: 'inbox' }, /^path must start with '\/'/],
      [{ connectionId: new Types.ObjectId().toString() }, /^connectionId: connection [0-9a-f]{24} not found/],
      [{ action: {} }, /^action must have exactly one of transfer and workflowId$/],
      [{ action: { workflowId: new Types.ObjectId().toString(), transfer: { destinationConnectionId: s.dst.id, destinationPath: '/x' } } }, /^action must have exactly one of transfer and workflowId, not both/],
      [{ action: { transfer: { destinationConnectionId: s.dst.id, destinationPath: '/x/{{params.nope}}' } } }, /^action\.transfer\.destinationPath names the parameter "nope", which does not exist/],
      [{ action: { transfer: { destinationConnectionId: s.dst.id, destinationPath: '/x/{{params.hidden}}' } } }, /^action\.transfer\.destinationPath .*secret/],
      [{ action: { transfer: { destinationConnectionId: s.dst.id, destinationPath: '/x/{{file.size}}' } } }, /^action\.transfer\.destinationPath has an unknown variable/],
      [{ action: { transfer: { destinationConnectionId: 'nope', destinationPath: '/x' } } }, /^action\.transfer\.destinationConnectionId: connection nope not found/],
      [{ recursive: 'yes' }, /recursive/],
      [{ extra: 1 }, /extra/],
    ];
    for (const [over, message] of cases) {
      const res = await post(s.key, s.body(over));
      try {
        expectError(res, 400, message);
      } catch (err) {
        throw new Error(`${JSON.stringify(over)}: ${res.statusCode} ${res.body}`, { cause: err });
      }
    }
    const { action: _drop, ...noAction } = s.body();
    expectError(await post(s.key, noAction), 400, /action/);
    expect(await app.db.watchers.countDocuments({ account_id: new Types.ObjectId(s.account.accountId) })).toBe(0);
    const made = (await post(s.key, s.body())).json().data;
    expectError(await put(s.key, made.id, {}), 400, /^body must contain at least one of/);
    expectError(await put(s.key, made.id, { poll_interval_seconds: 5 }), 400, /^poll_interval_seconds/);
  });

  test('another account\'s watchers are 404 on every route; watchers:write alone cannot create or change one (403, audited)', async () => {
    const s = await setup();
    const other = await setup();
    const theirs = (await post(other.key, other.body())).json().data;
    for (const res of [
      await get(s.key, `/watchers/${theirs.id}`), await get(s.key, `/watchers/${theirs.id}/events`), await put(s.key, theirs.id, { name: 'x' }),
      await app.inject({ method: 'DELETE', url: `/api/v1/watchers/${theirs.id}`, headers: auth(s.key) }),
    ]) expectError(res, 404, `Watcher ${theirs.id} not found`);
    expectError(await post(s.key, s.body({ connectionId: other.src.id })), 400, /^connectionId: connection .* not found/);
    const narrow = await createKey(app, s.key, ['watchers:read', 'watchers:write']);
    expectError(await post(narrow, s.body()), 403, 'A watcher runs transfers: this needs transfers:write, which the calling key does not hold');
    const mine = (await post(s.key, s.body())).json().data;
    expectError(await put(narrow, mine.id, { name: 'x' }), 403, /needs transfers:write/);
    expect(await app.db.auditEvents.countDocuments({ action: { $in: ['watcher.create', 'watcher.update'] }, outcome: 'denied', account_id: new Types.ObjectId(s.account.accountId) })).toBe(2);
    // Deleting one needs watchers:write only.
    expect((await app.inject({ method: 'DELETE', url: `/api/v1/watchers/${mine.id}`, headers: auth(narrow) })).statusCode).toBe(200);
  });
});

describe('agents', () => {
  test('an agent that polls watchers is told its watchers with the connection\'s settings; a report becomes one event and one transfer, acknowledged; a repeated report changes nothing', async () => {
    const s = await setup();
    const agent = await makeAgent(app, s.key);
    const w = (await post(s.key, s.body({ action: { transfer: { destinationConnectionId: s.dst.id, destinationPath: '/archive/{{file.name}}.d' } } }))).json().data;
    const { client } = await ProtocolClient.connect(app, agent.token, { watch: true, connector_types: ['sftp', 's3'] });
    const set = await setWhere(client, (ids) => ids.includes(w.id), 'the watcher in its set');
    const told = set.watchers.find((x) => x.id === w.id)!;
    expect(told).toMatchObject({
      revision: 1, poll_interval_seconds: 10,
      spec: { path: '/inbox', pattern: '*.csv', recursive: false, stable_seconds: 3, include_existing: false },
      connection: { id: s.src.id, type: 'sftp', host: 'sftp.example.test', credentials: { username: 'u' } },
      report_since: new Date(Math.floor(Date.parse(w.created_at) / 1000) * 1000).toISOString(), report_undated: false,
    });
    await eventually(async () => (await get(s.key, `/watchers/${w.id}`)).json().data.agent_id === agent.id, 'agent_id shown');

    client.send('watch.found', { watcher_id: w.id, revision: 1, seq: 1, files: [file('inbox/a.csv'), file('inbox/b.csv')] });
    await eventually(async () => acks(client).includes(1), 'report 1 acknowledged');
    const events = (await get(s.key, `/watchers/${w.id}/events`)).json().data as Array<{ id: string; path: string; transfer_id: string; action_status: string }>;
    expect(events.map((e) => e.path).sort()).toEqual(['inbox/a.csv', 'inbox/b.csv']);
    for (const e of events) {
      expect(e.transfer_id).toBe(e.id);
      const t = await getTransfer(app, s.key, e.transfer_id);
      const name = e.path.slice('inbox/'.length);
      expect(t).toMatchObject({ sourceConnectionId: s.src.id, sourcePath: `/${e.path}`, destinationConnectionId: s.dst.id, destinationPath: `/archive/${name}.d` });
      expect(['queued', 'in-progress']).toContain(e.action_status);
    }
    // The same versions again (a re-send after a reconnect, another agent during a hand-over): nothing new, still acknowledged.
    client.send('watch.found', { watcher_id: w.id, revision: 1, seq: 2, files: [file('inbox/b.csv'), file('inbox/a.csv', 'size:11:mtime:2')] });
    await eventually(async () => acks(client).includes(2), 'report 2 acknowledged');
    const after = (await get(s.key, `/watchers/${w.id}/events`)).json().data as Array<{ path: string; version: string }>;
    expect(after).toHaveLength(3);
    expect(await app.db.transfers.countDocuments({ account_id: new Types.ObjectId(s.account.accountId) })).toBe(3);
    expect(await app.db.auditEvents.countDocuments({ action: 'watcher.trigger', 'resource.id': w.id, outcome: 'success' })).toBe(3);
    client.close();
  });

  test('the transfer\'s filters go to the agent in the spec and decide what a report may hold; changing them is a new revision', async () => {
    const s = await setup();
    const agent = await makeAgent(app, s.key);
    const filters = { rules: ['- tmp/', '+ *.csv', '- **'], max_size: 10 };
    const action = (f: unknown) => ({ transfer: { destinationConnectionId: s.dst.id, destinationPath: '/archive/{{file.name}}', options: { filters: f } } });
    const w = (await post(s.key, s.body({ recursive: true, pattern: '*', action: action(filters) }))).json().data;
    const { client } = await ProtocolClient.connect(app, agent.token, { watch: true, connector_types: ['sftp', 's3'] });
    const set = await setWhere(client, (ids) => ids.includes(w.id), 'the watcher in its set');
    expect(set.watchers.find((x) => x.id === w.id)).toMatchObject({ revision: 1, spec: { path: '/inbox', recursive: true, filters } });

    // Paths relative to the watched folder: inbox/tmp/ is pruned, a.txt is not included, big.csv is over max_size.
    const refusedBefore = app.watcherEvents.refused;
    client.send('watch.found', {
      watcher_id: w.id, revision: 1, seq: 1,
      files: [file('inbox/a.csv'), file('inbox/sub/b.csv'), file('inbox/tmp/c.csv'), file('inbox/a.txt'), { ...file('inbox/big.csv'), size: 11 }],
    });
    await eventually(async () => acks(client).includes(1), 'acknowledged');
    const events = await app.db.watcherEvents.find({ watcher_id: new Types.ObjectId(w.id) }).lean();
    expect(events.map((e) => e.path).sort()).toEqual(['inbox/a.csv', 'inbox/sub/b.csv']);
    expect(app.watcherEvents.refused - refusedBefore).toBe(3);

    expect((await put(s.key, w.id, { action: action({ rules: ['- *.tmp'] }) })).statusCode).toBe(200);
    const changed = await setWhere(client, (_ids, next) => next.watchers.some((x) => x.id === w.id && x.revision === 2), 'revision 2 in its set');
    expect(changed.watchers.find((x) => x.id === w.id)).toMatchObject({ spec: { filters: { rules: ['- *.tmp'] } } });
    client.close();
  });

  test('reports of files the watcher does not watch, of another account\'s watcher or of a paused one are dropped (and acknowledged)', async () => {
    const s = await setup();
    const other = await setup();
    const agent = await makeAgent(app, s.key);
    const w = (await post(s.key, s.body({ recursive: false }))).json().data;
    const theirs = (await post(other.key, other.body())).json().data;
    const { client } = await ProtocolClient.connect(app, agent.token, { watch: true, connector_types: ['sftp', 's3'] });
    await setWhere(client, (ids) => ids.includes(w.id), 'the watcher in its set');
    const bad = [
      file('outbox/a.csv'), file('inbox/sub/a.csv'), file('inbox/a.txt'), file('inbox/../etc/a.csv'), { ...file('inbox/a.csv'), name: 'b.csv' },
      // Not plain relative paths: absolute, empty and "." segments, NUL and control characters, backslashes.
      file('/inbox/a.csv'), file('inbox//a.csv'), file('inbox/./a.csv'), file('./inbox/a.csv'), file('inbox/a\u0000.csv'), file('inbox/a\r\nb.csv'),
      file('inbox/a\u007f.csv'), file('inbox/..\\etc\\a.csv'),
    ];
    const refusedBefore = app.watcherEvents.refused;
    client.send('watch.found', { watcher_id: w.id, revision: 1, seq: 1, files: bad });
    client.send('watch.found', { watcher_id: theirs.id, revision: 1, seq: 2, files: [file('inbox/a.csv')] });
    await eventually(async () => acks(client).includes(1) && acks(client).includes(2), 'both acknowledged');
    expect(await app.db.watcherEvents.countDocuments({ watcher_id: { $in: [new Types.ObjectId(w.id), new Types.ObjectId(theirs.id)] } })).toBe(0);
    expect(app.watcherEvents.refused - refusedBefore).toBe(bad.length);

    await put(s.key, w.id, { active: false });
    await setWhere(client, (ids) => !ids.includes(w.id), 'the paused watcher out of its set');
    expect((await get(s.key, `/watchers/${w.id}`)).json().data.agent_id).toBeNull();
    client.send('watch.found', { watcher_id: w.id, revision: 1, seq: 3, files: [file('inbox/a.csv')] });
    await eventually(async () => acks(client).includes(3), 'acknowledged');
    expect(await app.db.watcherEvents.countDocuments({ watcher_id: new Types.ObjectId(w.id) })).toBe(0);
    client.close();
  });

  test('watch.polled: last_poll_at, last_error; a change of what is watched is a new revision whose baseline starts before the last poll', async () => {
    const s = await setup();
    const agent = await makeAgent(app, s.key);
    const w = (await post(s.key, s.body())).json().data;
    const { client } = await ProtocolClient.connect(app, agent.token, { watch: true, connector_types: ['sftp', 's3'] });
    await setWhere(client, (ids) => ids.includes(w.id), 'the watcher in its set');
    const summary = { listed: 3, matched: 2, reported: 0, waiting: 2, state_bytes: 120 };
    client.send('watch.polled', { watcher_id: w.id, revision: 1, started_at: new Date().toISOString(), duration_ms: 20, ...summary, error: 'NOT_FOUND: /inbox does not exist' });
    await eventually(async () => (await get(s.key, `/watchers/${w.id}`)).json().data.last_error === 'NOT_FOUND: /inbox does not exist', 'last_error');
    client.send('watch.polled', { watcher_id: w.id, revision: 1, started_at: new Date().toISOString(), duration_ms: 20, ...summary });
    await eventually(async () => (await get(s.key, `/watchers/${w.id}`)).json().data.last_poll_at !== null, 'last_poll_at');
    const polled = (await get(s.key, `/watchers/${w.id}`)).json().data;
    expect(polled.last_error).toBeNull();

    await put(s.key, w.id, { pattern: '*.txt' });
    const set = await setWhere(client, (_ids, p) => p.watchers.some((x) => x.id === w.id && x.revision === 2), 'revision 2');
    const told = set.watchers.find((x) => x.id === w.id)!;
    expect(told).toMatchObject({ spec: { pattern: '*.txt' }, report_undated: true });
    // A while before the last poll: its stable wait, an interval and the clock margin.
    expect(new Date(polled.last_poll_at).getTime() - new Date(told.report_since as string).getTime()).toBe((3 + 10) * 1000 + 5 * 60_000);
    // A poll of the old revision no longer moves anything.
    client.send('watch.polled', { watcher_id: w.id, revision: 1, started_at: new Date().toISOString(), duration_ms: 0, ...summary, error: 'old' });
    // A session's messages are handled one after another: once a later report (of a watcher that
    // does not exist: dropped, but acknowledged) is acknowledged, the old poll has been handled.
    client.send('watch.found', { watcher_id: String(new Types.ObjectId()), revision: 1, seq: 1, files: [file('inbox/marker.csv')] });
    await eventually(async () => acks(client).includes(1), 'a later report acknowledged');
    expect((await get(s.key, `/watchers/${w.id}`)).json().data.last_error).toBeNull();

    await app.inject({ method: 'DELETE', url: `/api/v1/watchers/${w.id}`, headers: auth(s.key) });
    await setWhere(client, (ids) => !ids.includes(w.id), 'the deleted watcher out of its set');
    client.close();
  });

  test('no agent that polls watchers: the watcher waits saying why; one of its pool connecting takes it; when that one goes, another takes over from the last poll', async () => {
    const s = await setup();
    const pinned = await makeConnection(app, s.key, 'sftp', { agent_pool: 'edge' });
    const w = (await post(s.key, s.body({ connectionId: pinned.id }))).json().data;
    const outsider = await makeAgent(app, s.key);
    const { client: out } = await ProtocolClient.connect(app, outsider.token, { watch: true, connector_types: ['sftp', 's3'] });
    const old = await makeAgent(app, s.key, { labels: ['edge'] });
    const { client: oldClient } = await ProtocolClient.connect(app, old.token, { connector_types: ['sftp', 's3'] });
    await eventually(async () => /^No online agent that polls watchers serves /.test((await get(s.key, `/watchers/${w.id}`)).json().data.last_error ?? ''), 'why it waits');
    expect(oldClient.all('watch.set')).toEqual([]);

    const a = await makeAgent(app, s.key, { labels: ['edge'] });
    const b = await makeAgent(app, s.key, { labels: ['edge'] });
    const { client: ca } = await ProtocolClient.connect(app, a.token, { watch: true, connector_types: ['sftp', 's3'] });
    await setWhere(ca, (ids) => ids.includes(w.id), 'a polls it');
    ca.send('watch.polled', { watcher_id: w.id, revision: 1, started_at: new Date().toISOString(), duration_ms: 5, listed: 0, matched: 0, reported: 0, waiting: 0, state_bytes: 0 });
    await eventually(async () => (await get(s.key, `/watchers/${w.id}`)).json().data.last_poll_at !== null, 'polled');
    const { client: cb } = await ProtocolClient.connect(app, b.token, { watch: true, connector_types: ['sftp', 's3'] });
    ca.close();
    const set = await setWhere(cb, (ids) => ids.includes(w.id), 'b takes it over');
    expect(set.watchers.find((x) => x.id === w.id)).toMatchObject({ report_undated: true, report_since: expect.any(String) });
    await eventually(async () => (await get(s.key, `/watchers/${w.id}`)).json().data.agent_id === b.id, 'agent_id is b');
    // a's held reports still count (it may serve the connection); b reporting the same version changes nothing.
    const { client: ca2 } = await ProtocolClient.connect(app, a.token, { watch: true, connector_types: ['sftp', 's3'] });
    ca2.send('watch.found', { watcher_id: w.id, revision: 1, seq: 7, files: [file('inbox/late.csv')] });
    cb.send('watch.found', { watcher_id: w.id, revision: 1, seq: 1, files: [file('inbox/late.csv')] });
    await eventually(async () => acks(ca2).includes(7) && acks(cb).includes(1), 'both acknowledged');
    expect(await app.db.watcherEvents.countDocuments({ watcher_id: new Types.ObjectId(w.id) })).toBe(1);
    // The outsider (not in the pool) is never told of it, and its reports are dropped.
    out.send('watch.found', { watcher_id: w.id, revision: 1, seq: 1, files: [file('inbox/x.csv')] });
    await eventually(async () => acks(out).includes(1), 'acknowledged');
    expect(out.all('watch.set').some((m) => m.payload.watchers.some((x) => x.id === w.id))).toBe(false);
    expect(await app.db.watcherEvents.countDocuments({ watcher_id: new Types.ObjectId(w.id) })).toBe(1);
    for (const c of [out, oldClient, cb, ca2]) c.close();
  });

  test('a version whose transfer cannot be made (its destination connection deleted since) is an event that failed, saying why', async () => {
    const s = await setup();
    const agent = await makeAgent(app, s.key);
    const w = (await post(s.key, s.body())).json().data;
    const { client } = await ProtocolClient.connect(app, agent.token, { watch: true, connector_types: ['sftp', 's3'] });
    await setWhere(client, (ids) => ids.includes(w.id), 'the watcher in its set');
    await app.db.connections.deleteOne({ _id: new Types.ObjectId(s.dst.id) });
    client.send('watch.found', { watcher_id: w.id, revision: 1, seq: 1, files: [file('inbox/a.csv')] });
    await eventually(async () => acks(client).includes(1), 'acknowledged');
    const [event] = (await get(s.key, `/watchers/${w.id}/events`)).json().data;
    expect(event).toMatchObject({
      path: 'inbox/a.csv', action_status: 'failed', transfer_id: null,
      error: `Destination connection ${s.dst.id} not found (action.transfer.destinationConnectionId)`,
    });
    expect(await app.db.auditEvents.countDocuments({ action: 'watcher.trigger', 'resource.id': w.id, outcome: 'failure' })).toBe(1);
    client.close();
  });

  test('an event an instance left pending is started by the sweep, once, with the transfer the event names', async () => {
    const s = await setup();
    const w = (await post(s.key, s.body())).json().data;
    const seenAt = new Date(Date.now() - 120_000);
    const _id = new Types.ObjectId();
    await app.db.watcherEvents.collection.insertOne({
      _id, watcher_id: new Types.ObjectId(w.id), account_id: new Types.ObjectId(s.account.accountId), path: 'inbox/left.csv', version: 'size:1:mtime:1',
      size: 1, modified_at: null, agent_id: new Types.ObjectId(), seen_at: seenAt, state: 'pending', transfer_id: null, workflow_run_id: null, error: null,
    });
    expect(await app.watcherEvents.sweepPending()).toBeGreaterThanOrEqual(1);
    const event = await app.db.watcherEvents.findById(_id).lean();
    expect(event).toMatchObject({ state: 'started', transfer_id: _id });
    expect(await getTransfer(app, s.key, String(_id))).toMatchObject({ sourcePath: '/inbox/left.csv' });
    // Started again (an instance that was only slow): the same transfer, no second one.
    await app.watcherEvents.start((await app.db.watchers.findById(w.id).lean()) as StoredWatcher, { ...event!, state: 'pending' } as StoredWatcherEvent);
    expect(await app.db.transfers.countDocuments({ account_id: new Types.ObjectId(s.account.accountId) })).toBe(1);
  });
});

describe('data is never code (docs/security.md "Templates: data is never code")', () => {
  test('a file named {{params.X}}.csv is copied under that very name: its path is never rendered, whatever parameter X spells', async () => {
    const s = await setup();
    // The attack: X spells a file the watcher does not watch (another folder, another pattern).
    expect((await app.inject({ method: 'POST', url: '/api/v1/parameters', headers: auth(s.key), payload: { name: 'X', value: 'payroll/salaries' } })).statusCode).toBe(201);
    const agent = await makeAgent(app, s.key);
    const w = (await post(s.key, s.body({ action: { transfer: { destinationConnectionId: s.dst.id, destinationPath: '/archive/{{file.name}}' } } }))).json().data;
    const { client } = await ProtocolClient.connect(app, agent.token, { watch: true, connector_types: ['sftp', 's3'] });
    await setWhere(client, (ids) => ids.includes(w.id), 'the watcher in its set');
    const names = ['{{params.X}}.csv', '{{run.id}}.csv', '{{date:YYYY}}.csv', '{{ params.X }.csv', '}}{{.csv'];
    client.send('watch.found', { watcher_id: w.id, revision: 1, seq: 1, files: names.map((n) => file(`inbox/${n}`)) });
    await eventually(async () => acks(client).includes(1), 'acknowledged');
    const events = await app.db.watcherEvents.find({ watcher_id: new Types.ObjectId(w.id) }).lean();
    expect(events.map((e) => e.path).sort()).toEqual(names.map((n) => `inbox/${n}`).sort());
    for (const e of events) {
      expect(e.state).toBe('started');
      const t = await getTransfer(app, s.key, String(e.transfer_id));
      const name = e.path.slice('inbox/'.length);
      expect(t).toMatchObject({ sourcePath: `/inbox/${name}`, destinationPath: `/archive/${name}` });
      expect(JSON.stringify(t)).not.toContain('payroll');
    }
    client.close();
  });

  test(`watch.found: a session reports at most ${FOUND_BURST} versions of a watcher at once; past it the report is refused whole, unacknowledged, and the session closed (4400)`, async () => {
    const s = await setup();
    const agent = await makeAgent(app, s.key);
    const w = (await post(s.key, s.body())).json().data;
    const { client } = await ProtocolClient.connect(app, agent.token, { watch: true, connector_types: ['sftp', 's3'] });
    await setWhere(client, (ids) => ids.includes(w.id), 'the watcher in its set');
    // Files the watcher does not watch cost the budget as much as any (and nothing else): a cheap flood.
    const frame = (seq: number) => ({ watcher_id: w.id, revision: 1, seq, files: Array.from({ length: MAX_FOUND_PER_REPORT }, (_, i) => file(`outbox/${seq}-${i}.csv`)) });
    const frames = FOUND_BURST / MAX_FOUND_PER_REPORT + 5;
    for (let seq = 1; seq <= frames; seq++) client.send('watch.found', frame(seq));
    const closed = await client.closed;
    expect(closed.code).toBe(CloseCodes.protocolError);
    expect(closed.reason).toMatch(/^watch\.found over \d+ file versions a second/);
    const acked = acks(client);
    // Everything within the budget was taken and acknowledged; what came past it was not (the agent re-sends it after reconnecting).
    expect(acked).toEqual(Array.from({ length: acked.length }, (_, i) => i + 1));
    expect(acked.length).toBeGreaterThanOrEqual(FOUND_BURST / MAX_FOUND_PER_REPORT);
    expect(acked.length).toBeLessThan(frames);
    expect(await app.db.watcherEvents.countDocuments({ watcher_id: new Types.ObjectId(w.id) })).toBe(0);
  });

  test('watch.polled: duration_ms is bounded, and a poll is never dated before the session was given the watcher (last_poll_at cannot move back)', async () => {
    const s = await setup();
    const agent = await makeAgent(app, s.key);
    const w = (await post(s.key, s.body())).json().data;
    const beforeConnect = Date.now();
    const { client } = await ProtocolClient.connect(app, agent.token, { watch: true, connector_types: ['sftp', 's3'] });
    await setWhere(client, (ids) => ids.includes(w.id), 'the watcher in its set');
    const summary = { listed: 0, matched: 0, reported: 0, waiting: 0, state_bytes: 0 };
    // A "poll" of a day, the most a frame may say: dated no earlier than this session got the watcher.
    client.send('watch.polled', { watcher_id: w.id, revision: 1, started_at: new Date().toISOString(), duration_ms: MAX_POLL_DURATION_MS, ...summary });
    const polled = await eventually(async () => (await get(s.key, `/watchers/${w.id}`)).json().data.last_poll_at as string | null, 'last_poll_at');
    expect(Date.parse(polled)).toBeGreaterThanOrEqual(beforeConnect);
    // Longer than that is a frame out of bounds.
    client.send('watch.polled', { watcher_id: w.id, revision: 1, started_at: new Date().toISOString(), duration_ms: MAX_POLL_DURATION_MS + 1, ...summary });
    expect((await client.closed).code).toBe(CloseCodes.protocolError);
    expect((await get(s.key, `/watchers/${w.id}`)).json().data.last_poll_at).toBe(polled);
  });
});
