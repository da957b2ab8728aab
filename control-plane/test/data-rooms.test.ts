import { createHash, randomBytes } from 'node:crypto';
import { Types } from 'mongoose';
import type { App } from '../src/app.js';
import { auth, buildTestApp, createAccount, createKey, expectError, type TestAccount } from './helper.js';
import { auditsOf, eicar, EICAR_SIGNATURE, eventsOf, multipart, storedFiles, testScanner, uploaded } from './files-helper.js';

/**
 * Data rooms against the real database and the test clamd: the account's routes with a key, the
 * invite token routes with nothing but the token, from an outside client address.
 */
let app: App;
let owner: TestAccount;
let stranger: TestAccount;
const logs: string[] = [];
const OUTSIDE = '203.0.113.9';

beforeAll(async () => {
  app = await buildTestApp({ scanner: testScanner(), shareRateLimitPerMinute: 10_000 }, { logs });
  owner = await createAccount(app);
  stranger = await createAccount(app);
});
afterAll(() => app.close());

const call = (method: string, url: string, key: string, payload?: unknown) =>
  app.inject({ method: method as 'POST', url: `/api/v1${url}`, headers: auth(key), ...(payload === undefined ? {} : { payload: payload as object }) });

async function createRoom(key = owner.apiKey, body: Record<string, unknown> = { name: 'Deal room' }) {
  const res = await call('POST', '/data-rooms', key, body);
  if (res.statusCode !== 201) throw new Error(`createRoom: ${res.statusCode} ${res.body}`);
  return res.json().data as { id: string; name: string; status: string; expires_at: string | null };
}

async function invite(roomId: string, role: 'viewer' | 'contributor', extra: Record<string, unknown> = {}) {
  const res = await call('POST', `/data-rooms/${roomId}/members`, owner.apiKey, { email: `${role}-${randomBytes(3).toString('hex')}@partner.test`, role, ...extra });
  if (res.statusCode !== 201) throw new Error(`invite: ${res.statusCode} ${res.body}`);
  return res.json().data as { id: string; token: string; invite_url: string; email: string; role: string; status: string };
}

/** `POST <url>` (a room's upload route) with one file part, with or without a key. */
function uploadTo(url: string, name: string, content: Buffer | string, opts: { key?: string; headers?: Record<string, string>; extraParts?: boolean } = {}) {
  const { payload, headers } = multipart([...(opts.extraParts ? [{ name: 'path', content: '/elsewhere' }] : []), { name: 'file', filename: name, content }]);
  return app.inject({
    method: 'POST', url, payload, remoteAddress: OUTSIDE,
    headers: { ...headers, ...(opts.key ? auth(opts.key) : {}), ...opts.headers },
  });
}

/** An unauthenticated request from outside, as an invited party's. */
const outside = (url: string, headers: Record<string, string> = {}, method: 'GET' | 'HEAD' = 'GET') =>
  app.inject({ method, url, headers, remoteAddress: OUTSIDE });

describe('rooms: create, read, change, delete', () => {
  test('create answers the room (201) and emits data_room.created; list, get, put, delete; a deleted room is 404', async () => {
    const expires = new Date(Date.now() + 86_400_000).toISOString();
    const room = await createRoom(owner.apiKey, { name: 'Acquisition', description: 'Q3 documents', expires_at: expires });
    expect(room).toMatchObject({ name: 'Acquisition', description: 'Q3 documents', expires_at: expires, status: 'active', created_by: { type: 'api_key' } });
    const events = await eventsOf(app, owner.accountId, 'data_room.created');
    expect(events.map((e) => e.data.id)).toContain(room.id);

    expect((await call('GET', '/data-rooms', owner.apiKey)).json().data.map((r: { id: string }) => r.id)).toContain(room.id);
    expect((await call('GET', `/data-rooms/${room.id}`, owner.apiKey)).json().data.id).toBe(room.id);
    const put = await call('PUT', `/data-rooms/${room.id}`, owner.apiKey, { name: 'Renamed', description: null, expires_at: null });
    expect(put.statusCode).toBe(200);
    expect(put.json().data).toMatchObject({ name: 'Renamed', description: null, expires_at: null });

    const del = await call('DELETE', `/data-rooms/${room.id}`, owner.apiKey);
    expect(del.json()).toEqual({ data: { id: room.id, deleted: true } });
    expectError(await call('GET', `/data-rooms/${room.id}`, owner.apiKey), 404, `Data room ${room.id} not found`);
    expect((await call('GET', '/data-rooms', owner.apiKey)).json().data.map((r: { id: string }) => r.id)).not.toContain(room.id);
    expect((await auditsOf(app, owner.accountId, 'data_room.delete')).map((a) => a.resource?.id)).toContain(room.id);
  });

  test('every bad input is 4xx {error} naming the field, and changes nothing', async () => {
    const before = await app.db.dataRooms.countDocuments();
    const bad: Array<[unknown, RegExp]> = [
      [{}, /name/],
      [{ name: '' }, /name/],
      [{ name: '   ' }, /name/],
      [{ name: 7 }, /name/],
      [{ name: 'x', expires_at: 'tomorrow' }, /expires_at/],
      [{ name: 'x', expires_at: new Date(Date.now() - 1000).toISOString() }, /expires_at must be in the future/],
      [{ name: 'x', description: 'd'.repeat(2001) }, /description/],
      [{ name: 'x', owner: 'me' }, /owner/],
      [{ name: 'x', quota_bytes: 0 }, /quota_bytes/],
      [{ name: 'x', quota_bytes: 1.5 }, /quota_bytes/],
      [{ name: 'x', quota_bytes: '100' }, /quota_bytes/],
    ];
    for (const [payload, message] of bad) expectError(await call('POST', '/data-rooms', owner.apiKey, payload), 400, message);
    expect(await app.db.dataRooms.countDocuments()).toBe(before);
    const room = await createRoom();
    expectError(await call('PUT', `/data-rooms/${room.id}`, owner.apiKey, {}), 400, /at least one of name, description, expires_at, quota_bytes/);
    expectError(await call('PUT', `/data-rooms/${room.id}`, owner.apiKey, { quota_bytes: -1 }), 400, /quota_bytes/);
    expectError(await call('PUT', `/data-rooms/${room.id}`, owner.apiKey, { expires_at: '2001-01-01T00:00:00Z' }), 400, /expires_at must be in the future/);
    expectError(await call('GET', '/data-rooms?limit=0', owner.apiKey), 400, /limit/);
  });

  test("another account's rooms, files and members are 404, whatever the body", async () => {
    const room = await createRoom();
    const member = await invite(room.id, 'viewer');
    const file = await uploaded(app, owner.apiKey, 'mine.txt', 'mine');
    for (const [method, url, body] of [
      ['GET', `/data-rooms/${room.id}`], ['PUT', `/data-rooms/${room.id}`, { name: 'x' }], ['DELETE', `/data-rooms/${room.id}`],
      ['GET', `/data-rooms/${room.id}/files`], ['POST', `/data-rooms/${room.id}/files`, { nonsense: 1 }],
      ['DELETE', `/data-rooms/${room.id}/files/${file.id}`], ['GET', `/data-rooms/${room.id}/members`],
      ['POST', `/data-rooms/${room.id}/members`, {}], ['DELETE', `/data-rooms/${room.id}/members/${member.id}`],
    ] as Array<[string, string, unknown?]>) {
      expectError(await call(method, url, stranger.apiKey, body), 404, `Data room ${room.id} not found`);
    }
    expectError(await uploadTo(`/api/v1/data-rooms/${room.id}/upload`, 'a.txt', 'a', { key: stranger.apiKey }), 404);
    // Nor can a stranger's room take the owner's file.
    const theirs = await createRoom(stranger.apiKey);
    expectError(await call('POST', `/data-rooms/${theirs.id}/files`, stranger.apiKey, { file_id: file.id }), 404, /^file_id: file .* not found$/);
    expect((await call('GET', `/data-rooms/${room.id}/members`, owner.apiKey)).json().data[0].status).toBe('active');
  });
});

describe('room files', () => {
  test('a store file is added once (409 again), listed with who added it, and removed from the room only', async () => {
    const room = await createRoom();
    const file = await uploaded(app, owner.apiKey, 'terms.pdf', 'terms');
    const add = await call('POST', `/data-rooms/${room.id}/files`, owner.apiKey, { file_id: file.id });
    expect(add.statusCode).toBe(201);
    expect(add.json().data).toMatchObject({ id: file.id, name: 'terms.pdf', added_by: { type: 'api_key' } });
    expectError(await call('POST', `/data-rooms/${room.id}/files`, owner.apiKey, { file_id: file.id }), 409, /^file_id: .* already in this data room$/);
    const events = await eventsOf(app, owner.accountId, 'data_room.file_added');
    expect(events.filter((e) => e.data.room_id === room.id).map((e) => e.data.file_id)).toEqual([file.id]);

    const list = await call('GET', `/data-rooms/${room.id}/files`, owner.apiKey);
    expect(list.json()).toMatchObject({ data: [{ id: file.id, name: 'terms.pdf' }], next_cursor: null });
    expect((await call('DELETE', `/data-rooms/${room.id}/files/${file.id}`, owner.apiKey)).json()).toEqual({ data: { id: file.id, deleted: true } });
    expect((await call('GET', `/data-rooms/${room.id}/files`, owner.apiKey)).json().data).toEqual([]);
    expect((await call('GET', `/files/${file.id}`, owner.apiKey)).statusCode).toBe(200);
    expectError(await call('DELETE', `/data-rooms/${room.id}/files/${file.id}`, owner.apiKey), 404, /is not in this data room/);
  });

  test('bad file inputs name the field: missing, unknown, deleted file_id', async () => {
    const room = await createRoom();
    expectError(await call('POST', `/data-rooms/${room.id}/files`, owner.apiKey, {}), 400, /file_id/);
    expectError(await call('POST', `/data-rooms/${room.id}/files`, owner.apiKey, { file_id: 5 }), 400, /file_id/);
    expectError(await call('POST', `/data-rooms/${room.id}/files`, owner.apiKey, { file_id: String(new Types.ObjectId()) }), 404, /^file_id: file/);
    const gone = await uploaded(app, owner.apiKey, 'gone.txt', 'gone');
    await call('DELETE', `/files/${gone.id}`, owner.apiKey);
    expectError(await call('POST', `/data-rooms/${room.id}/files`, owner.apiKey, { file_id: gone.id }), 404, /^file_id: file/);
  });

  test('an upload into the room lands in its folder of the store; EICAR is 422 with nothing kept; a path part is 400', async () => {
    const room = await createRoom();
    const content = randomBytes(200_000);
    const res = await uploadTo(`/api/v1/data-rooms/${room.id}/upload`, 'model.xlsx', content, { key: owner.apiKey });
    expect(res.statusCode).toBe(201);
    const file = res.json().data;
    expect(file).toMatchObject({ name: 'model.xlsx', path: `/data-rooms/${room.id}`, size: content.length, sha256: createHash('sha256').update(content).digest('hex') });
    expect((await call('GET', `/data-rooms/${room.id}/files`, owner.apiKey)).json().data.map((f: { id: string }) => f.id)).toEqual([file.id]);

    const before = storedFiles(app);
    const files = await app.db.files.countDocuments();
    expectError(await uploadTo(`/api/v1/data-rooms/${room.id}/upload`, 'eicar.com', eicar(), { key: owner.apiKey }), 422, `File rejected: malware detected (${EICAR_SIGNATURE})`);
    expect(storedFiles(app)).toEqual(before);
    expect(await app.db.files.countDocuments()).toBe(files);
    expectError(await uploadTo(`/api/v1/data-rooms/${room.id}/upload`, 'a.txt', 'a', { key: owner.apiKey, extraParts: true }), 400, /unknown part "path" \(allowed: file\)/);
    expectError(await app.inject({ method: 'POST', url: `/api/v1/data-rooms/${room.id}/upload`, headers: auth(owner.apiKey), payload: { a: 1 } }), 415);
  });
});

describe('members and their invites', () => {
  test('an invite answers a one-time token and URL; the token is 32 random bytes kept only as its SHA-256', async () => {
    const room = await createRoom();
    const member = await invite(room.id, 'viewer');
    expect(member).toMatchObject({ role: 'viewer', status: 'active', room_id: room.id, revoked_at: null });
    expect(member.token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(member.invite_url).toBe(`/api/v1/rooms/${member.token}`);
    const raw = await app.dbConnection.collection('data_room_members').findOne({ _id: new Types.ObjectId(member.id) });
    expect(raw!.token_hash).toBe(createHash('sha256').update(member.token).digest('hex'));
    expect(JSON.stringify(await app.dbConnection.collection('data_room_members').find().toArray())).not.toContain(member.token);
    const listed = (await call('GET', `/data-rooms/${room.id}/members`, owner.apiKey)).json().data;
    expect(listed).toEqual([expect.objectContaining({ id: member.id, email: member.email })]);
    expect(JSON.stringify(listed)).not.toContain(member.token);
    const events = await eventsOf(app, owner.accountId, 'data_room.member_added');
    expect(events.find((e) => e.data.member_id === member.id)?.data).toMatchObject({ room_id: room.id, role: 'viewer' });
    expect(JSON.stringify(events)).not.toContain(member.token);
    expect(JSON.stringify(await auditsOf(app, owner.accountId, 'data_room.member_add'))).not.toContain(member.token);
  });

  test('bad member inputs name the field; an active member of the same email is 409', async () => {
    const room = await createRoom();
    const bad: Array<[unknown, RegExp]> = [
      [{ role: 'viewer' }, /email/],
      [{ email: 'not-an-email', role: 'viewer' }, /email/],
      [{ email: 'a@b.test' }, /role/],
      [{ email: 'a@b.test', role: 'owner' }, /role/],
      [{ email: 'a@b.test', role: 'viewer', expires_at: 'soon' }, /expires_at/],
      [{ email: 'a@b.test', role: 'viewer', expires_at: '2000-01-01T00:00:00Z' }, /expires_at must be in the future/],
      [{ email: 'a@b.test', role: 'viewer', token: 'mine' }, /token/],
    ];
    for (const [payload, message] of bad) expectError(await call('POST', `/data-rooms/${room.id}/members`, owner.apiKey, payload), 400, message);
    await call('POST', `/data-rooms/${room.id}/members`, owner.apiKey, { email: 'Same@Partner.test', role: 'viewer' });
    expectError(await call('POST', `/data-rooms/${room.id}/members`, owner.apiKey, { email: 'same@partner.test', role: 'contributor' }), 409, /^email: same@partner.test is already a member/);
    expectError(await call('DELETE', `/data-rooms/${room.id}/members/${String(new Types.ObjectId())}`, owner.apiKey), 404, /^Member/);
  });

  test('a caller hands out no more than it holds: files:read for a viewer, files:write too for a contributor, and no longer than its key lives', async () => {
    const room = await createRoom();
    const file = await uploaded(app, owner.apiKey, 'x.txt', 'x');
    const roomsOnly = await createKey(app, owner.apiKey, ['data-rooms:read', 'data-rooms:write']);
    expectError(await call('POST', `/data-rooms/${room.id}/files`, roomsOnly, { file_id: file.id }), 403, /needs files:read/);
    expectError(await call('POST', `/data-rooms/${room.id}/members`, roomsOnly, { email: 'v@p.test', role: 'viewer' }), 403, /needs files:read/);
    expectError(await uploadTo(`/api/v1/data-rooms/${room.id}/upload`, 'a.txt', 'a', { key: roomsOnly }), 403, /missing files:write, files:read/);
    const reader = await createKey(app, owner.apiKey, ['data-rooms:write', 'files:read']);
    expect((await call('POST', `/data-rooms/${room.id}/members`, reader, { email: 'v@p.test', role: 'viewer' })).statusCode).toBe(201);
    expectError(await call('POST', `/data-rooms/${room.id}/members`, reader, { email: 'c@p.test', role: 'contributor' }), 403, /missing files:write/);
    const expiring = await createKey(app, owner.apiKey, ['data-rooms:write', 'files:read'], { expires_in_days: 1 });
    expectError(await call('POST', `/data-rooms/${room.id}/members`, expiring, { email: 'e@p.test', role: 'viewer' }), 403, /^The calling key expires at .*data room invite/);
    const soon = new Date(Date.now() + 3_600_000).toISOString();
    expect((await call('POST', `/data-rooms/${room.id}/members`, expiring, { email: 'e@p.test', role: 'viewer', expires_at: soon })).statusCode).toBe(201);
    const denied = await app.db.auditEvents.countDocuments({ account_id: new Types.ObjectId(owner.accountId), action: 'data_room.member_add', outcome: 'denied' });
    expect(denied).toBeGreaterThanOrEqual(3);
  });
});

describe('the invite token routes (no account)', () => {
  test('a viewer reads the room and downloads byte-identical; may not upload; each is audited with the member as actor', async () => {
    const room = await createRoom();
    const content = randomBytes(100_000);
    const file = (await uploadTo(`/api/v1/data-rooms/${room.id}/upload`, 'deck.pdf', content, { key: owner.apiKey })).json().data;
    const viewer = await invite(room.id, 'viewer');

    const view = await outside(viewer.invite_url);
    expect(view.statusCode).toBe(200);
    expect(view.headers['referrer-policy']).toBe('no-referrer');
    expect(view.json().data).toMatchObject({
      room: { id: room.id, name: 'Deal room' }, member: { id: viewer.id, role: 'viewer' },
      files: [{ id: file.id, name: 'deck.pdf', size: content.length, sha256: file.sha256 }], next_cursor: null,
    });
    expect(JSON.stringify(view.json())).not.toMatch(/account_id|storage_key|uploaded_by|\/data-rooms\//);

    const got = await outside(`${viewer.invite_url}/files/${file.id}/download`);
    expect(got.statusCode).toBe(200);
    expect(got.rawPayload.equals(content)).toBe(true);
    expect(got.headers['content-disposition']).toContain('deck.pdf');
    expectError(await outside(`${viewer.invite_url}/files/${String(new Types.ObjectId())}/download`), 404);
    // A file of the account that is not in the room is not reachable with the invite.
    const other = await uploaded(app, owner.apiKey, 'private.txt', 'private');
    expectError(await outside(`${viewer.invite_url}/files/${other.id}/download`), 404, /is not in this data room/);

    expectError(await uploadTo(`${viewer.invite_url}/upload`, 'x.txt', 'x'), 403, /not upload/);

    const actor = { type: 'room_member', id: viewer.id };
    const activity = (await call('GET', `/activity?actor_type=room_member&actor_id=${viewer.id}&limit=100`, owner.apiKey)).json().data;
    const seen = activity.map((a: { action: string; outcome: string; actor: unknown; ip: string }) => ({ action: a.action, outcome: a.outcome, actor: a.actor, ip: a.ip }));
    expect(seen).toEqual(expect.arrayContaining([
      { action: 'data_room.view', outcome: 'success', actor, ip: OUTSIDE },
      { action: 'file.download', outcome: 'success', actor, ip: OUTSIDE },
      { action: 'file.upload', outcome: 'denied', actor, ip: OUTSIDE },
    ]));
  });

  test('a contributor uploads (scanned: EICAR is 422 and nothing is kept); the owner sees the file, uploaded by the member', async () => {
    const room = await createRoom();
    const contributor = await invite(room.id, 'contributor');
    const content = randomBytes(50_000);
    const res = await uploadTo(`${contributor.invite_url}/upload`, 'signed.pdf', content);
    expect(res.statusCode).toBe(201);
    const up = res.json().data;
    expect(up).toMatchObject({ name: 'signed.pdf', size: content.length });
    expect(Object.keys(up).sort()).toEqual(['added_at', 'id', 'mime_type', 'name', 'sha256', 'size']);
    const listed = (await call('GET', `/data-rooms/${room.id}/files`, owner.apiKey)).json().data;
    expect(listed).toEqual([expect.objectContaining({ id: up.id, uploaded_by: { type: 'room_member', id: contributor.id }, added_by: { type: 'room_member', id: contributor.id } })]);

    const before = storedFiles(app);
    const files = await app.db.files.countDocuments();
    expectError(await uploadTo(`${contributor.invite_url}/upload`, 'eicar.com', eicar()), 422, `File rejected: malware detected (${EICAR_SIGNATURE})`);
    expect(storedFiles(app)).toEqual(before);
    expect(await app.db.files.countDocuments()).toBe(files);
    expect((await outside(contributor.invite_url)).json().data.files.map((f: { id: string }) => f.id)).toEqual([up.id]);
    expectError(await uploadTo(`${contributor.invite_url}/upload`, 'a.txt', 'a', { extraParts: true }), 400, /unknown part "path"/);

    const audits = await app.db.auditEvents.find({ 'actor.type': 'room_member', 'actor.id': contributor.id, action: 'file.upload' }).lean();
    expect(audits.map((a) => a.outcome)).toEqual(expect.arrayContaining(['success', 'denied']));
    expect(audits.find((a) => a.outcome === 'denied')?.details).toMatchObject({ signature: EICAR_SIGNATURE });
  });

  test("a contributor's uploads stop at the room's quota: 413 naming it, nothing kept; a raised quota lets them in again", async () => {
    const fresh = await createRoom();
    expect(fresh).toMatchObject({ quota_bytes: app.config.dataRoomQuotaBytes });
    const room = await createRoom(owner.apiKey, { name: 'Small room', quota_bytes: 100_000 });
    expect(room).toMatchObject({ quota_bytes: 100_000 });
    const contributor = await invite(room.id, 'contributor');
    const url = `${contributor.invite_url}/upload`;
    expect((await uploadTo(url, 'a.bin', randomBytes(60_000))).statusCode).toBe(201);

    const before = storedFiles(app);
    const files = await app.db.files.countDocuments();
    // Over what is left: the stream stops at the byte past it, nothing is kept.
    expectError(await uploadTo(url, 'b.bin', randomBytes(50_000)), 413, "File exceeds what is left of the data room's quota: 40000 of 100000 bytes (quota_bytes)");
    expect(storedFiles(app)).toEqual(before);
    expect(await app.db.files.countDocuments()).toBe(files);
    // The same through the account's own upload route into the room.
    expectError(await uploadTo(`/api/v1/data-rooms/${room.id}/upload`, 'b.bin', randomBytes(50_000), { key: owner.apiKey }), 413, /what is left of the data room's quota: 40000 of 100000/);
    // Exactly what is left fits; then the room is full and reads no more.
    expect((await uploadTo(url, 'c.bin', randomBytes(40_000))).statusCode).toBe(201);
    expectError(await uploadTo(url, 'd.bin', 'x'), 413, "The data room's quota is used up: 100000 of 100000 bytes (quota_bytes); nothing was kept");
    const audits = await app.db.auditEvents.find({ 'actor.type': 'room_member', 'actor.id': contributor.id, action: 'file.upload', outcome: 'failure' }).lean();
    expect(audits.map((a) => a.details?.reason)).toEqual(expect.arrayContaining([expect.stringMatching(/quota is used up/), expect.stringMatching(/what is left/)]));

    // A raised quota lets the next upload in.
    const put = await call('PUT', `/data-rooms/${room.id}`, owner.apiKey, { quota_bytes: 100_001 });
    expect(put.json().data).toMatchObject({ quota_bytes: 100_001 });
    expect((await uploadTo(url, 'e.bin', 'y')).statusCode).toBe(201);
    expect((await call('GET', `/data-rooms/${room.id}/files`, owner.apiKey)).json().data.map((f: { name: string }) => f.name).sort()).toEqual(['a.bin', 'c.bin', 'e.bin']);
  });

  test('revoked at once (410), an expired member or room 410, a deleted room 410; unknown and malformed tokens 404', async () => {
    const room = await createRoom();
    const a = await invite(room.id, 'viewer');
    const b = await invite(room.id, 'contributor');
    expect((await outside(a.invite_url)).statusCode).toBe(200);
    await call('DELETE', `/data-rooms/${room.id}/members/${a.id}`, owner.apiKey);
    expectError(await outside(a.invite_url), 410, 'This invite has been revoked');
    expectError(await uploadTo(`${a.invite_url}/upload`, 'x.txt', 'x'), 410, 'This invite has been revoked');
    expect((await call('GET', `/data-rooms/${room.id}/members`, owner.apiKey)).json().data.find((m: { id: string }) => m.id === a.id).status).toBe('revoked');
    expectError(await call('DELETE', `/data-rooms/${room.id}/members/${a.id}`, owner.apiKey), 404);

    await app.db.dataRoomMembers.updateOne({ _id: new Types.ObjectId(b.id) }, { $set: { expires_at: new Date(Date.now() - 1000) } });
    expectError(await outside(b.invite_url), 410, 'This invite has expired');

    const c = await invite(room.id, 'viewer');
    await app.db.dataRooms.updateOne({ _id: new Types.ObjectId(room.id) }, { $set: { expires_at: new Date(Date.now() - 1000) } });
    expectError(await outside(c.invite_url), 410, 'This data room has expired');
    expect((await call('GET', `/data-rooms/${room.id}`, owner.apiKey)).json().data.status).toBe('expired');
    await call('PUT', `/data-rooms/${room.id}`, owner.apiKey, { expires_at: null });
    expect((await outside(c.invite_url)).statusCode).toBe(200);
    await call('DELETE', `/data-rooms/${room.id}`, owner.apiKey);
    expectError(await outside(c.invite_url), 410, 'This data room has been deleted');

    expectError(await outside(`/api/v1/rooms/${randomBytes(32).toString('base64url')}`), 404, 'Invite not found');
    expectError(await outside('/api/v1/rooms/short'), 404, 'Invite not found');
  });

  test('a browser gets a page: strict policy, no script, names escaped, a form for a contributor only; a gone invite is a page too', async () => {
    const room = await createRoom(owner.apiKey, { name: 'Room <b>bold</b>' });
    const html = { accept: 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8' };
    const contributor = await invite(room.id, 'contributor');
    await uploadTo(`${contributor.invite_url}/upload`, '<img src=x onerror=alert(1)>.txt', 'hi');
    const page = await outside(contributor.invite_url, html);
    expect(page.statusCode).toBe(200);
    expect(page.headers['content-type']).toBe('text/html; charset=utf-8');
    const csp = String(page.headers['content-security-policy']);
    expect(csp).toMatch(/^default-src 'none'; style-src 'sha256-[A-Za-z0-9+/=]+'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'$/);
    expect(page.headers['cache-control']).toBe('no-store');
    expect(page.body).not.toMatch(/<script/i);
    expect(page.body).toContain('Room &lt;b&gt;bold&lt;/b&gt;');
    expect(page.body).toContain('&lt;img src=x onerror=alert(1)&gt;.txt');
    expect(page.body).not.toContain('<img');
    expect(page.body).toContain(`action="${contributor.invite_url}/upload"`);
    const style = /<style>([\s\S]*?)<\/style>/.exec(page.body)![1]!;
    expect(csp).toContain(`'sha256-${createHash('sha256').update(style).digest('base64')}'`);

    const viewer = await invite(room.id, 'viewer');
    const viewerPage = await outside(viewer.invite_url, html);
    expect(viewerPage.body).not.toContain('<form');
    // JSON stays the answer for anything that does not prefer HTML.
    expect((await outside(viewer.invite_url, { accept: '*/*' })).headers['content-type']).toMatch(/^application\/json/);
    expect((await outside(viewer.invite_url, { accept: 'application/json, text/html;q=0.5' })).headers['content-type']).toMatch(/^application\/json/);

    // The form's post is answered by a redirect to the page, which says it worked.
    const posted = await uploadTo(`${contributor.invite_url}/upload`, 'form.txt', 'from the page', { headers: html });
    expect(posted.statusCode).toBe(303);
    expect(posted.headers.location).toBe(`${contributor.invite_url}?notice=uploaded`);
    expect((await outside(String(posted.headers.location), html)).body).toContain('Your file was uploaded and scanned.');
    const blocked = await uploadTo(`${contributor.invite_url}/upload`, 'eicar.com', eicar(), { headers: html });
    expect(blocked.statusCode).toBe(422);
    expect(blocked.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(blocked.body).toContain('File rejected: malware detected');

    await call('DELETE', `/data-rooms/${room.id}/members/${viewer.id}`, owner.apiKey);
    const gone = await outside(viewer.invite_url, html);
    expect(gone.statusCode).toBe(410);
    expect(gone.headers['content-security-policy']).toBe(csp);
    expect(gone.body).toContain('This invite has been revoked');
    // Every step of every invite route: a gone invite's download and form post (refused before the body is read) are pages too.
    const goneDownload = await outside(`${viewer.invite_url}/files/${String(new Types.ObjectId())}/download`, html);
    expect({ status: goneDownload.statusCode, type: goneDownload.headers['content-type'] }).toEqual({ status: 410, type: 'text/html; charset=utf-8' });
    await call('DELETE', `/data-rooms/${room.id}/members/${contributor.id}`, owner.apiKey);
    const gonePost = await uploadTo(`${contributor.invite_url}/upload`, 'late.txt', 'late', { headers: html });
    expect(gonePost.statusCode).toBe(410);
    expect(gonePost.headers['content-security-policy']).toBe(csp);
    expect(gonePost.body).toContain(`<a href="${contributor.invite_url}">Back to the room</a>`);
    // A client that does not prefer HTML still gets {error}.
    expectError(await uploadTo(`${contributor.invite_url}/upload`, 'late.txt', 'late'), 410, 'This invite has been revoked');
  });

  test('the token routes are limited per client address, and no token reaches a log line', async () => {
    const limited = await buildTestApp({ scanner: { kind: 'none' }, shareRateLimitPerMinute: 3 });
    try {
      const o = await createAccount(limited);
      const room = (await limited.inject({ method: 'POST', url: '/api/v1/data-rooms', headers: auth(o.apiKey), payload: { name: 'r' } })).json().data;
      const m = (await limited.inject({ method: 'POST', url: `/api/v1/data-rooms/${room.id}/members`, headers: auth(o.apiKey), payload: { email: 'a@b.test', role: 'viewer' } })).json().data;
      const statuses: number[] = [];
      for (let i = 0; i < 5; i++) statuses.push((await limited.inject({ method: 'GET', url: m.invite_url, remoteAddress: '192.0.2.44' })).statusCode);
      expect(statuses.filter((s) => s === 429).length).toBeGreaterThanOrEqual(1);
      const last = await limited.inject({ method: 'GET', url: m.invite_url, remoteAddress: '192.0.2.44' });
      expectError(last, 429);
      expect(last.headers['retry-after']).toBeDefined();
      // Another address has its own budget.
      expect((await limited.inject({ method: 'GET', url: m.invite_url, remoteAddress: '192.0.2.45' })).statusCode).toBe(200);
    } finally {
      await limited.close();
    }

    const room = await createRoom();
    const member = await invite(room.id, 'contributor');
    await outside(member.invite_url);
    await outside(`${member.invite_url}/files/${String(new Types.ObjectId())}/download`);
    await uploadTo(`${member.invite_url}/upload`, 'l.txt', 'logged?');
    const text = logs.join('');
    expect(text).toContain('/api/v1/rooms/[redacted]');
    expect(text).not.toContain(member.token);
  });
});
