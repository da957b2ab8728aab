import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Types } from 'mongoose';
import type { App } from '../src/app.js';
import { Messages, ShareLinkMessages } from '@xfer/shared';
import { auth, buildTestApp, createAccount, createKey, expectError, type TestAccount } from './helper.js';
import { eventually } from './protocol-client.js';

/**
 * Share links against the real database (FerretDB or MongoDB, whichever the test services run):
 * files are uploaded through POST /files/upload, downloads go through the public route.
 */
let app: App;
let owner: TestAccount;

const SHARE_LIMIT = 1000;

beforeAll(async () => {
  app = await buildTestApp({ scanner: { kind: 'none' }, shareRateLimitPerMinute: SHARE_LIMIT });
  owner = await createAccount(app);
});
afterAll(() => app.close());

/** A multipart body with a `path` part and a `file` part, as a browser or the CLI sends it. */
function multipart(name: string, content: Buffer): { payload: Buffer; headers: Record<string, string> } {
  const boundary = `----xfer-test-${randomBytes(8).toString('hex')}`;
  const payload = Buffer.concat([
    Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="path"\r\n\r\n/shared\r\n`),
    Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${name}"\r\nContent-Type: application/octet-stream\r\n\r\n`),
    content,
    Buffer.from(`\r\n--${boundary}--\r\n`),
  ]);
  return { payload, headers: { 'content-type': `multipart/form-data; boundary=${boundary}` } };
}

async function upload(key: string, content = randomBytes(64 * 1024), name = 'report.bin'): Promise<{ id: string; content: Buffer }> {
  const { payload, headers } = multipart(name, content);
  const res = await app.inject({ method: 'POST', url: '/api/v1/files/upload', headers: { ...headers, ...auth(key) }, payload });
  if (res.statusCode !== 201) throw new Error(`upload: ${res.statusCode} ${res.body}`);
  return { id: res.json().data.id as string, content };
}

const share = (key: string, fileId: string, payload?: unknown) =>
  app.inject({ method: 'POST', url: `/api/v1/files/${fileId}/share`, headers: auth(key), ...(payload === undefined ? {} : { payload: payload as object }) });

async function createShare(key: string, fileId: string, payload: Record<string, unknown> = {}) {
  const res = await share(key, fileId, payload);
  if (res.statusCode !== 201) throw new Error(`share: ${res.statusCode} ${res.body}`);
  return res.json().data as { id: string; token: string; url: string; expires_at: string; max_downloads: number | null };
}

/** An unauthenticated download, from its own client address unless told. */
const download = (url: string, opts: { method?: 'GET' | 'HEAD'; headers?: Record<string, string>; ip?: string } = {}) =>
  app.inject({ method: opts.method ?? 'GET', url, headers: opts.headers, remoteAddress: opts.ip ?? '198.51.100.7' });

const downloadsOf = async (shareId: string) => app.db.shareDownloads.countDocuments({ share_id: new Types.ObjectId(shareId) });

/** Fixed rate-limit windows: start a burst early in a minute so it cannot straddle two windows. */
async function awayFromWindowEdge(): Promise<void> {
  const left = 60_000 - (Date.now() % 60_000);
  if (left < 8_000) await new Promise((r) => setTimeout(r, left + 100));
}

describe('POST /files/:id/share', () => {
  test('answers token, url and expiry once; the token is 32 random bytes stored only as its SHA-256', async () => {
    const file = await upload(owner.apiKey);
    const res = await share(owner.apiKey, file.id, { expires_in_hours: 2, max_downloads: 3 });
    expect(res.statusCode).toBe(201);
    const data = res.json().data;
    expect(data).toMatchObject({ file_id: file.id, max_downloads: 3, downloads: 0, status: 'active', revoked_at: null });
    expect(data.token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(Buffer.from(data.token, 'base64url')).toHaveLength(32);
    expect(data.url).toBe(`/api/v1/files/shared/${data.token}`);
    const hours = (Date.parse(data.expires_at) - Date.now()) / 3_600_000;
    expect(hours).toBeGreaterThan(1.99);
    expect(hours).toBeLessThanOrEqual(2);

    const raw = await app.dbConnection.collection('share_links').findOne({ _id: new Types.ObjectId(data.id) });
    expect(raw!.token_hash).toBe(createHash('sha256').update(data.token).digest('hex'));
    const everything = JSON.stringify(await app.dbConnection.collection('share_links').find().toArray());
    expect(everything).not.toContain(data.token);
  });

  test('defaults: 24 hours, unlimited downloads, with or without an empty JSON body', async () => {
    const file = await upload(owner.apiKey);
    for (const res of [await share(owner.apiKey, file.id), await share(owner.apiKey, file.id, {})]) {
      expect(res.statusCode).toBe(201);
      const data = res.json().data;
      expect(data.max_downloads).toBeNull();
      const hours = (Date.parse(data.expires_at) - Date.now()) / 3_600_000;
      expect(hours).toBeGreaterThan(23.99);
      expect(hours).toBeLessThanOrEqual(24);
    }
  });

  test('every bad input is 400 {error} and creates nothing', async () => {
    const file = await upload(owner.apiKey);
    const before = await app.db.shareLinks.countDocuments();
    const bad: Array<[unknown, RegExp]> = [
      [{ expires_in_hours: 0 }, /expires_in_hours/],
      [{ expires_in_hours: 8761 }, /expires_in_hours/],
      [{ expires_in_hours: 1.5 }, /expires_in_hours must be integer/],
      [{ expires_in_hours: '24' }, /expires_in_hours must be integer/],
      [{ expires_in_hours: null }, /expires_in_hours/],
      [{ max_downloads: 0 }, /max_downloads/],
      [{ max_downloads: -1 }, /max_downloads/],
      [{ max_downloads: 2.5 }, /max_downloads must be integer/],
      [{ max_downloads: '1' }, /max_downloads must be integer/],
      [{ max_downloads: 1_000_001 }, /max_downloads/],
      [{ token: 'mine' }, /unknown field 'token'/],
      [[], /body must be object/],
    ];
    for (const [payload, message] of bad) {
      const res = await share(owner.apiKey, file.id, payload);
      try {
        expectError(res, 400, message);
      } catch (err) {
        throw new Error(`${JSON.stringify(payload)}: ${res.statusCode} ${res.body}`, { cause: err });
      }
    }
    const malformed = await app.inject({
      method: 'POST', url: `/api/v1/files/${file.id}/share`, headers: { ...auth(owner.apiKey), 'content-type': 'application/json' }, payload: '{"max_downloads":',
    });
    expectError(malformed, 400, 'Request body is not valid JSON');
    const scalar = await app.inject({
      method: 'POST', url: `/api/v1/files/${file.id}/share`, headers: { ...auth(owner.apiKey), 'content-type': 'application/json' }, payload: '24',
    });
    expectError(scalar, 400, /body must be object/);
    const nullBody = await app.inject({
      method: 'POST', url: `/api/v1/files/${file.id}/share`, headers: { ...auth(owner.apiKey), 'content-type': 'application/json' }, payload: 'null',
    });
    expectError(nullBody, 400, /body must be object/);
    expect(await app.db.shareLinks.countDocuments()).toBe(before);
  });

  test("unknown, malformed, deleted and another account's files are 404", async () => {
    const stranger = await createAccount(app);
    const file = await upload(owner.apiKey);
    expectError(await share(stranger.apiKey, file.id, {}), 404, `File ${file.id} not found`);
    expectError(await share(owner.apiKey, String(new Types.ObjectId()), {}), 404);
    expectError(await share(owner.apiKey, 'not-an-id', {}), 404);
    const deleted = await upload(owner.apiKey);
    expect((await app.inject({ method: 'DELETE', url: `/api/v1/files/${deleted.id}`, headers: auth(owner.apiKey) })).statusCode).toBe(200);
    expectError(await share(owner.apiKey, deleted.id, {}), 404);
  });

  test('writes event file.shared and audit file.share, neither with the token', async () => {
    const file = await upload(owner.apiKey);
    const link = await createShare(owner.apiKey, file.id, { max_downloads: 2 });
    const event = await app.db.outboxEvents.findOne({ type: 'file.shared', 'data.share_id': link.id }).lean();
    expect(event!.data).toEqual({ id: file.id, share_id: link.id, expires_at: link.expires_at, max_downloads: 2 });
    expect(String(event!.account_id)).toBe(owner.accountId);
    const audit = await app.db.auditEvents.findOne({ action: 'file.share', 'details.share_id': link.id }).lean();
    expect(audit).toMatchObject({ outcome: 'success', resource: { type: 'file', id: file.id }, details: { share_id: link.id, max_downloads: 2 } });
    expect(String(audit!.account_id)).toBe(owner.accountId);
    expect(JSON.stringify([event, audit])).not.toContain(link.token);
  });
});

describe('GET /files/shared/:token', () => {
  test('downloads without authentication, bytes identical, headers of a download, audit and event', async () => {
    const file = await upload(owner.apiKey, randomBytes(300_000), 'quarterly report.pdf');
    const link = await createShare(owner.apiKey, file.id);
    const res = await download(link.url);
    expect(res.statusCode).toBe(200);
    expect(res.rawPayload.equals(file.content)).toBe(true);
    expect(res.headers['content-length']).toBe(String(file.content.length));
    expect(res.headers['content-disposition']).toContain('quarterly report.pdf');
    expect(res.headers['referrer-policy']).toBe('no-referrer');
    expect(res.headers['ratelimit-limit']).toBe(String(SHARE_LIMIT));

    // Written before the first byte: there when the client has the file.
    const audit = await app.db.auditEvents.findOne({ action: 'file.download', 'actor.id': link.id }).lean();
    expect(audit).toMatchObject({
      actor: { type: 'share_link', id: link.id }, outcome: 'success', resource: { type: 'file', id: file.id }, ip: '198.51.100.7',
      details: { via: 'share_link', share_id: link.id, size: file.content.length },
    });
    expect(String(audit!.account_id)).toBe(owner.accountId);
    const event = await app.db.outboxEvents.findOne({ type: 'file.downloaded', 'data.share_id': link.id }).lean();
    expect(event!.data).toEqual({ id: file.id, name: 'quarterly report.pdf', size: file.content.length, via: 'share_link', share_id: link.id });
    expect(JSON.stringify([audit, event])).not.toContain(link.token);
  });

  test('unknown and malformed tokens are 404 "Share link not found"', async () => {
    for (const token of [randomBytes(32).toString('base64url'), 'short', `${'A'.repeat(42)}!`, 'A'.repeat(100), '%00']) {
      expectError(await download(`/api/v1/files/shared/${token}`), 404, ShareLinkMessages.notFound);
    }
    // Past Fastify's maxParamLength (100) the router itself refuses the URL, before any route.
    expect((await download(`/api/v1/files/shared/${'A'.repeat(5000)}`)).statusCode).toBe(414);
  });

  test('an expired link is 410 saying so', async () => {
    const file = await upload(owner.apiKey);
    const link = await createShare(owner.apiKey, file.id);
    await app.db.shareLinks.updateOne({ _id: link.id }, { $set: { expires_at: new Date(Date.now() - 1000) } });
    expectError(await download(link.url), 410, ShareLinkMessages.expired);
    expect((await download(link.url, { method: 'HEAD' })).statusCode).toBe(410);
  });

  test('an exhausted link is 410 saying so; a revoked one too, and revoking twice is 404', async () => {
    const file = await upload(owner.apiKey);
    const link = await createShare(owner.apiKey, file.id, { max_downloads: 2 });
    expect((await download(link.url)).statusCode).toBe(200);
    expect((await download(link.url)).statusCode).toBe(200);
    expectError(await download(link.url), 410, ShareLinkMessages.exhausted);
    expect(await downloadsOf(link.id)).toBe(2);

    const other = await createShare(owner.apiKey, file.id);
    const revoke = () => app.inject({ method: 'DELETE', url: `/api/v1/files/${file.id}/share/${other.id}`, headers: auth(owner.apiKey) });
    const res = await revoke();
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ data: { id: other.id, deleted: true } });
    expectError(await download(other.url), 410, ShareLinkMessages.revoked);
    expectError(await revoke(), 404, `Share link ${other.id} not found`);
    const audit = await app.db.auditEvents.findOne({ action: 'file.share_revoke', 'details.share_id': other.id }).lean();
    expect(audit).toMatchObject({ outcome: 'success', actor: { type: 'api_key' }, resource: { type: 'file', id: file.id } });
  });

  test('a link of a soft-deleted file is 410 saying so', async () => {
    const file = await upload(owner.apiKey);
    const link = await createShare(owner.apiKey, file.id);
    expect((await app.inject({ method: 'DELETE', url: `/api/v1/files/${file.id}`, headers: auth(owner.apiKey) })).statusCode).toBe(200);
    expectError(await download(link.url), 410, ShareLinkMessages.fileDeleted);
  });

  test('a Range request counts as a download (206); HEAD, 304 and 416 do not', async () => {
    const file = await upload(owner.apiKey, randomBytes(100_000));
    const link = await createShare(owner.apiKey, file.id, { max_downloads: 2 });
    const head = await download(link.url, { method: 'HEAD' });
    expect(head.statusCode).toBe(200);
    expect(head.headers['content-length']).toBe('100000');
    expect(head.rawPayload).toHaveLength(0);
    const etag = String(head.headers.etag);
    expect((await download(link.url, { headers: { 'if-none-match': etag } })).statusCode).toBe(304);
    expectError(await download(link.url, { headers: { range: 'bytes=200000-300000' } }), 416);
    expect(await downloadsOf(link.id)).toBe(0);

    const part = await download(link.url, { headers: { range: 'bytes=100-199' } });
    expect(part.statusCode).toBe(206);
    expect(part.rawPayload.equals(file.content.subarray(100, 200))).toBe(true);
    expect(await downloadsOf(link.id)).toBe(1);
    const audit = await app.db.auditEvents.findOne({ action: 'file.download', 'actor.id': link.id }).lean();
    expect(audit!.details).toMatchObject({ range: 'bytes=100-199', download: 1 });
    expect((await download(link.url)).statusCode).toBe(200);
    // Exhausted: 410 for every request, conditional ones and HEAD included.
    expect((await download(link.url, { method: 'HEAD' })).statusCode).toBe(410);
    expectError(await download(link.url), 410, ShareLinkMessages.exhausted);
    expectError(await download(link.url, { headers: { 'if-none-match': etag } }), 410, ShareLinkMessages.exhausted);
    expect((await app.db.shareDownloads.find({ share_id: new Types.ObjectId(link.id) }).lean()).map((d) => d.n).sort()).toEqual([1, 2]);
  });

  test('a number given back below the others is taken again, and only up to max_downloads', async () => {
    const file = await upload(owner.apiKey);
    const link = await createShare(owner.apiKey, file.id, { max_downloads: 3 });
    // Downloads 2 and 3 are held while number 1 was given back (its audit record could not be written).
    const shareId = new Types.ObjectId(link.id);
    await app.db.shareDownloads.create([{ share_id: shareId, n: 2 }, { share_id: shareId, n: 3 }]);
    expect((await download(link.url)).statusCode).toBe(200);
    expectError(await download(link.url), 410, ShareLinkMessages.exhausted);
    expect((await app.db.shareDownloads.find({ share_id: shareId }).lean()).map((d) => d.n).sort()).toEqual([1, 2, 3]);
  });

  test('100 concurrent requests on max_downloads 1 over real HTTP: exactly one 200, 99 × 410', async () => {
    const file = await upload(owner.apiKey, randomBytes(200_000));
    const link = await createShare(owner.apiKey, file.id, { max_downloads: 1 });
    await awayFromWindowEdge();
    await app.listen({ port: 0, host: '127.0.0.1' });
    const { port } = app.server.address() as AddressInfo;
    const results = await Promise.all(Array.from({ length: 100 }, async () => {
      const res = await fetch(`http://127.0.0.1:${port}${link.url}`);
      return { status: res.status, body: Buffer.from(await res.arrayBuffer()) };
    }));
    const ok = results.filter((r) => r.status === 200);
    const gone = results.filter((r) => r.status === 410);
    expect(ok).toHaveLength(1);
    expect(ok[0]!.body.equals(file.content)).toBe(true);
    expect(gone).toHaveLength(99);
    for (const r of gone) expect(JSON.parse(r.body.toString())).toEqual({ error: ShareLinkMessages.exhausted });
    expect(await downloadsOf(link.id)).toBe(1);
    expect(await app.db.auditEvents.countDocuments({ action: 'file.download', 'actor.id': link.id })).toBe(1);

    // A limit above one is exact as well.
    const five = await createShare(owner.apiKey, file.id, { max_downloads: 5 });
    const statuses = await Promise.all(Array.from({ length: 40 }, async () => {
      const res = await fetch(`http://127.0.0.1:${port}${five.url}`);
      await res.arrayBuffer();
      return res.status;
    }));
    expect(statuses.filter((s) => s === 200)).toHaveLength(5);
    expect(statuses.filter((s) => s === 410)).toHaveLength(35);
    expect(await downloadsOf(five.id)).toBe(5);
  });
});

describe('per-address rate limit of the download', () => {
  test('429 with Retry-After past XFER_SHARE_RATE_LIMIT_PER_MINUTE; the account API budget is untouched', async () => {
    // A second instance on the same database, with a small download budget. It does not reconcile
    // account counts with the first during the test (rate-limit.test.ts covers that), so its
    // RateLimit-Remaining moves by its own requests only.
    const limited = await buildTestApp({
      scanner: { kind: 'none' }, shareRateLimitPerMinute: 3, databaseName: app.config.databaseName, fileStore: app.config.fileStore,
      rateLimitSyncMs: 3_600_000,
    });
    try {
      const acct = await createAccount(app);
      const file = await upload(acct.apiKey);
      const link = await createShare(acct.apiKey, file.id);
      await awayFromWindowEdge();
      const api = () => limited.inject({ method: 'GET', url: '/api/v1/shares', headers: auth(acct.apiKey), remoteAddress: '203.0.113.50' });
      const before = Number((await api()).headers['ratelimit-remaining']);
      const statuses: number[] = [];
      let last;
      for (let i = 0; i < 4; i++) {
        // HEAD spends the same budget.
        last = await limited.inject({ method: i === 2 ? 'HEAD' : 'GET', url: link.url, remoteAddress: '203.0.113.50' });
        expect(last.headers['ratelimit-limit']).toBe('3');
        statuses.push(last.statusCode);
      }
      expect(statuses).toEqual([200, 200, 200, 429]);
      expectError(last!, 429, Messages.rateLimited);
      expect(Number(last!.headers['retry-after'])).toBeGreaterThan(0);
      expect(Number(last!.headers['retry-after'])).toBeLessThanOrEqual(60);
      // Unknown tokens spend the budget too (no guessing at full speed).
      expectError(await limited.inject({ method: 'GET', url: '/api/v1/files/shared/x', remoteAddress: '203.0.113.50' }), 429);
      // Another address has its own budget; the account's API calls only spent their own.
      expect((await limited.inject({ method: 'GET', url: link.url, remoteAddress: '203.0.113.51' })).statusCode).toBe(200);
      const after = await api();
      expect(after.statusCode).toBe(200);
      expect(Number(after.headers['ratelimit-remaining'])).toBe(before - 1);
    } finally {
      await limited.close();
    }
  });
});

describe('listing and revoking', () => {
  test('GET /files/:id/shares and GET /shares: records with status and downloads, never a token, paged', async () => {
    const acct = await createAccount(app);
    const a = await upload(acct.apiKey);
    const b = await upload(acct.apiKey);
    const active = await createShare(acct.apiKey, a.id, { max_downloads: 5 });
    const exhausted = await createShare(acct.apiKey, a.id, { max_downloads: 1 });
    const expired = await createShare(acct.apiKey, a.id);
    const revoked = await createShare(acct.apiKey, a.id);
    const onB = await createShare(acct.apiKey, b.id);
    expect((await download(active.url)).statusCode).toBe(200);
    expect((await download(exhausted.url)).statusCode).toBe(200);
    await app.db.shareLinks.updateOne({ _id: expired.id }, { $set: { expires_at: new Date(Date.now() - 1000) } });
    await app.inject({ method: 'DELETE', url: `/api/v1/files/${a.id}/share/${revoked.id}`, headers: auth(acct.apiKey) });
    await app.inject({ method: 'DELETE', url: `/api/v1/files/${b.id}`, headers: auth(acct.apiKey) });

    const ofA = await app.inject({ method: 'GET', url: `/api/v1/files/${a.id}/shares`, headers: auth(acct.apiKey) });
    expect(ofA.statusCode).toBe(200);
    const rows = ofA.json().data as Array<Record<string, unknown>>;
    expect(rows.map((r) => [r.id, r.status, r.downloads])).toEqual([
      [revoked.id, 'revoked', 0], [expired.id, 'expired', 0], [exhausted.id, 'exhausted', 1], [active.id, 'active', 1],
    ]);
    expect(Object.keys(rows[0]!).sort()).toEqual(
      ['created_at', 'created_by', 'downloads', 'expires_at', 'file_id', 'id', 'max_downloads', 'revoked_at', 'status'],
    );
    expect(rows[0]!.revoked_at).toEqual(expect.any(String));
    expect(rows[0]!.created_by).toMatchObject({ type: 'api_key' });

    const page1 = await app.inject({ method: 'GET', url: '/api/v1/shares?limit=3', headers: auth(acct.apiKey) });
    const page2 = await app.inject({ method: 'GET', url: `/api/v1/shares?limit=3&cursor=${page1.json().next_cursor}`, headers: auth(acct.apiKey) });
    const all = [...page1.json().data, ...page2.json().data] as Array<Record<string, unknown>>;
    expect(page2.json().next_cursor).toBeNull();
    expect(all.map((r) => r.id)).toEqual([onB.id, revoked.id, expired.id, exhausted.id, active.id]);
    expect(all[0]!.status).toBe('file_deleted');
    const text = JSON.stringify(all) + ofA.body;
    for (const link of [active, exhausted, expired, revoked, onB]) expect(text).not.toContain(link.token);
    expect(text).not.toContain('token');
    // The deleted file's links are listed under /shares, but the file itself is gone.
    expectError(await app.inject({ method: 'GET', url: `/api/v1/files/${b.id}/shares`, headers: auth(acct.apiKey) }), 404);
  });

  test('bad list queries are 400 {error}', async () => {
    for (const url of ['/api/v1/shares?active=true', '/api/v1/shares?limit=0', '/api/v1/shares?limit=x', '/api/v1/shares?cursor=bm90LWEtY3Vyc29y']) {
      expectError(await app.inject({ method: 'GET', url, headers: auth(owner.apiKey) }), 400);
    }
  });

  test("another account sees none of the links and cannot revoke them (404)", async () => {
    const stranger = await createAccount(app);
    const file = await upload(owner.apiKey);
    const link = await createShare(owner.apiKey, file.id);
    expectError(await app.inject({ method: 'GET', url: `/api/v1/files/${file.id}/shares`, headers: auth(stranger.apiKey) }), 404);
    const theirs = await app.inject({ method: 'GET', url: '/api/v1/shares', headers: auth(stranger.apiKey) });
    expect(theirs.json().data).toEqual([]);
    expectError(await app.inject({ method: 'DELETE', url: `/api/v1/files/${file.id}/share/${link.id}`, headers: auth(stranger.apiKey) }), 404);
    // Neither with the file id of one of their own files.
    const own = await upload(stranger.apiKey);
    expectError(await app.inject({ method: 'DELETE', url: `/api/v1/files/${own.id}/share/${link.id}`, headers: auth(stranger.apiKey) }), 404);
    expectError(await app.inject({ method: 'DELETE', url: `/api/v1/files/${file.id}/share/not-an-id`, headers: auth(owner.apiKey) }), 404);
    expect((await download(link.url)).statusCode).toBe(200);
  });

  test('scopes: files:write with files:read creates (the link reads the file), files:write revokes, files:read lists', async () => {
    const file = await upload(owner.apiKey);
    const reader = await createKey(app, owner.apiKey, ['files:read']);
    const writer = await createKey(app, owner.apiKey, ['files:write']);
    const both = await createKey(app, owner.apiKey, ['files:read', 'files:write']);
    expectError(await share(reader, file.id, {}), 403, Messages.missingScope);
    expectError(await share(writer, file.id, {}), 403, /creating one needs files:read, which the calling key does not hold/);
    const link = await createShare(both, file.id);
    expectError(await app.inject({ method: 'GET', url: '/api/v1/shares', headers: auth(writer) }), 403, Messages.missingScope);
    expectError(await app.inject({ method: 'GET', url: `/api/v1/files/${file.id}/shares`, headers: auth(writer) }), 403, Messages.missingScope);
    expect((await app.inject({ method: 'GET', url: `/api/v1/files/${file.id}/shares`, headers: auth(reader) })).statusCode).toBe(200);
    const url = `/api/v1/files/${file.id}/share/${link.id}`;
    expectError(await app.inject({ method: 'DELETE', url, headers: auth(reader) }), 403, Messages.missingScope);
    expect((await app.inject({ method: 'DELETE', url, headers: auth(writer) })).statusCode).toBe(200);
    expectError(await app.inject({ method: 'GET', url: '/api/v1/shares' }), 401);
  });
});

describe('no escalation through share links (docs/security.md "Escalation rules")', () => {
  test("a link minted by an expiring key expires no later than the key; refusals are audited", async () => {
    const file = await upload(owner.apiKey);
    const key = await createKey(app, owner.apiKey, ['files:read', 'files:write'], { expires_in_days: 2 });
    expectError(await share(key, file.id, { expires_in_hours: 49 }), 403,
      /^The calling key expires at \S+: a share link it creates must expire no later \(the requested share link expires at \S+; give expires_in_hours within that\)$/);
    const ok = await createShare(key, file.id, { expires_in_hours: 47 });
    expect(Date.parse(ok.expires_at)).toBeLessThan(Date.now() + 48 * 3600_000);
    const denied = await app.db.auditEvents.find({ action: 'file.share', outcome: 'denied', 'resource.id': file.id }).lean();
    expect(denied.map((r) => (r.details as { reason: string }).reason)).toEqual(['expiry beyond the calling key']);
  });
});

describe('logs', () => {
  /**
   * The built server (dist: `npm test` builds first) in a child process, logging at trace level
   * with the app's own logger settings, on the test app's database and file store.
   */
  async function startLoggingServer(): Promise<{ base: string; stop: () => Promise<string>; output: () => string }> {
    const dist = join(dirname(fileURLToPath(import.meta.url)), '..', 'dist');
    const script = `
      const { buildApp } = await import(${JSON.stringify(pathToFileURL(join(dist, 'app.js')).href)});
      const { parseConfig } = await import(${JSON.stringify(pathToFileURL(join(dist, 'config.js')).href)});
      const app = await buildApp(parseConfig(process.env));
      await app.listen({ port: 0, host: '127.0.0.1' });
      process.stderr.write('PORT ' + app.server.address().port + '\\n');
      // Logs are written as they happen; a close still waiting for sockets is not worth waiting on.
      process.on('SIGTERM', () => { setTimeout(() => process.exit(0), 2000).unref(); app.close().then(() => process.exit(0)); });`;
    const dataDir = mkdtempSync(join(tmpdir(), 'xfer-share-logs-'));
    const store = app.config.fileStore;
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
      env: {
        ...process.env, MONGODB_URI: process.env.MONGODB_URI, XFER_DB_NAME: app.config.databaseName, XFER_DATA_DIR: dataDir,
        // The test app's master key: an instance on the same database opens what the first sealed.
        XFER_MASTER_KEY: app.config.masterKeys![0]!.toString('base64'), XFER_LOG_LEVEL: 'trace', XFER_SCANNER: 'none',
        // The budget is shared with the test app's instance (same database), which the race spent from 127.0.0.1.
        XFER_SHARE_RATE_LIMIT_PER_MINUTE: '100000',
        XFER_FILE_STORE: 'local', XFER_FILE_STORE_DIR: store.kind === 'local' ? store.dir : '',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => { stdout += chunk.toString(); });
    const port = await new Promise<number>((resolve, reject) => {
      child.stderr.on('data', (chunk: Buffer) => {
        stderr += chunk.toString();
        const match = /PORT (\d+)/.exec(stderr);
        if (match) resolve(Number(match[1]));
      });
      child.once('exit', (code) => reject(new Error(`server exited (${code}): ${stderr} ${stdout}`)));
    });
    const stop = async () => {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await exited;
      rmSync(dataDir, { recursive: true, force: true });
      return stdout + stderr;
    };
    return { base: `http://127.0.0.1:${port}`, stop, output: () => stdout };
  }

  test('no share token reaches a log line: downloads, 404, 410, a failed read, a client that hangs up', async () => {
    const good = await createShare(owner.apiKey, (await upload(owner.apiKey)).id);
    const revokedFile = await upload(owner.apiKey);
    const revoked = await createShare(owner.apiKey, revokedFile.id);
    await app.inject({ method: 'DELETE', url: `/api/v1/files/${revokedFile.id}/share/${revoked.id}`, headers: auth(owner.apiKey) });
    const broken = await upload(owner.apiKey);
    const brokenLink = await createShare(owner.apiKey, broken.id, { max_downloads: 1 });
    const record = await app.db.files.findById(broken.id).lean();
    await app.fileStore.remove(record!.storage_key);
    const big = await createShare(owner.apiKey, (await upload(owner.apiKey, randomBytes(8 * 1024 * 1024))).id);
    const unknown = randomBytes(32).toString('base64url');

    const server = await startLoggingServer();
    let logs = '';
    try {
      expect((await fetch(server.base + good.url).then(async (r) => { await r.arrayBuffer(); return r.status; }))).toBe(200);
      expect((await fetch(server.base + `/api/v1/files/shared/${unknown}`)).status).toBe(404);
      expect((await fetch(server.base + revoked.url)).status).toBe(410);
      // Content gone from the store: 503, and the download taken for it is given back.
      const failed = await fetch(server.base + brokenLink.url);
      expect(failed.status).toBe(503);
      expect(await failed.json()).toEqual({ error: 'File content unavailable' });
      expect(await downloadsOf(brokenLink.id)).toBe(0);
      const aborter = new AbortController();
      const hangUpId = `hang-up-${randomBytes(6).toString('hex')}`;
      const hangUp = await fetch(server.base + big.url, { signal: aborter.signal, headers: { 'x-request-id': hangUpId } });
      await hangUp.body!.getReader().read();
      aborter.abort();
      // The server's last line on the hung-up request: its stream cut off (or its end, had every byte gone out already).
      await eventually(async () => server.output().split('\n').some((line) => line.includes(`"reqId":"${hangUpId}"`)
        && /"msg":"(stream closed prematurely|request completed)"/.test(line)), 'the hang-up logged');
    } finally {
      logs = await server.stop();
    }
    // The logs were captured, with the URLs in them redacted.
    expect(logs).toContain('/api/v1/files/shared/[redacted]');
    expect(logs).toMatch(/stored file content is missing/);
    for (const token of [good.token, revoked.token, brokenLink.token, big.token, unknown]) expect(logs).not.toContain(token);
  });
});
