import { createHash, randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import type { App } from '../src/app.js';
import { auth, buildTestApp, createAccount, createKey, expectError, type TestAccount } from './helper.js';
import { contentDisposition } from '../src/routes/files/send-file.js';
import { auditsOf, eventsOf, storedFiles, testScanner, uploaded } from './files-helper.js';

let app: App;
let owner: TestAccount;

beforeAll(async () => {
  app = await buildTestApp({ scanner: testScanner() });
  owner = await createAccount(app);
});
afterAll(() => app.close());

const get = (url: string, token = owner.apiKey, headers: Record<string, string> = {}) =>
  app.inject({ method: 'GET', url: `/api/v1${url}`, headers: { ...auth(token), ...headers } });
const names = (res: { json(): { data: Array<{ name: string }> } }) => res.json().data.map((f) => f.name);

describe('GET /files', () => {
  let acct: TestAccount;
  beforeAll(async () => {
    acct = await createAccount(app);
    for (const [name, path] of [['r1', '/'], ['r2', '/'], ['a1', '/a'], ['a2', '/a'], ['a3', '/a'], ['ab1', '/a/b'], ['ax', '/ax']] as const) {
      await uploaded(app, acct.apiKey, name, name, path);
    }
  });

  test('lists the files directly in the folder, newest first; / by default', async () => {
    expect(names(await get('/files', acct.apiKey))).toEqual(['r2', 'r1']);
    expect(names(await get('/files?path=/a', acct.apiKey))).toEqual(['a3', 'a2', 'a1']);
    expect(names(await get('/files?path=/a/b/', acct.apiKey))).toEqual(['ab1']);
    expect(names(await get('/files?path=/nothing', acct.apiKey))).toEqual([]);
  });

  test('recursive=true lists the whole subtree, and /a does not take in /ax', async () => {
    expect(names(await get('/files?path=/a&recursive=true', acct.apiKey))).toEqual(['ab1', 'a3', 'a2', 'a1']);
    expect(names(await get('/files?recursive=true', acct.apiKey))).toHaveLength(7);
  });

  test('pages with limit and cursor, with no file twice or missed', async () => {
    const first = (await get('/files?path=/a&limit=2', acct.apiKey)).json();
    expect(first.data.map((f: { name: string }) => f.name)).toEqual(['a3', 'a2']);
    expect(first.next_cursor).toEqual(expect.any(String));
    const second = (await get(`/files?path=/a&limit=2&cursor=${first.next_cursor}`, acct.apiKey)).json();
    expect(second.data.map((f: { name: string }) => f.name)).toEqual(['a1']);
    expect(second.next_cursor).toBeNull();
  });

  test('bad folders, limits, cursors and unknown parameters → 400', async () => {
    expectError(await get('/files?path=/a/../b', acct.apiKey), 400, /querystring.path .*'\.\.'/);
    expectError(await get('/files?path=a', acct.apiKey), 400, /querystring.path must start with/);
    expectError(await get('/files?path=/a%5Cb', acct.apiKey), 400, /backslash/);
    expectError(await get('/files?path=/a%00b', acct.apiKey), 400, /NUL/);
    expectError(await get('/files?limit=0', acct.apiKey), 400);
    expectError(await get('/files?cursor=nope', acct.apiKey), 400, /cursor/);
    expectError(await get('/files?recursive=maybe', acct.apiKey), 400);
    expectError(await get('/files?folder=/a', acct.apiKey), 400, /unknown field 'folder'/);
  });
});

describe('GET /files/search', () => {
  let acct: TestAccount;
  beforeAll(async () => {
    acct = await createAccount(app);
    const png = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==', 'base64');
    await uploaded(app, acct.apiKey, 'Invoice-2024.pdf', Buffer.concat([Buffer.from('%PDF-1.4\n'), Buffer.alloc(991, 0x20)]), '/bills');
    await uploaded(app, acct.apiKey, 'invoice.csv', 'a,b\n'.repeat(25), '/bills');
    await uploaded(app, acct.apiKey, 'photo.png', png, '/pics');
    await uploaded(app, acct.apiKey, 'a.c(1)+[x].txt', 'x'.repeat(10));
    await uploaded(app, acct.apiKey, 'abc.txt', 'y'.repeat(5000));
    await uploaded(app, acct.apiKey, 'notes.txt', '');
  });
  const search = (query: string) => get(`/files/search?${query}`, acct.apiKey);

  test('q is a literal, case-insensitive substring of the name, in any folder', async () => {
    expect(names(await search('q=INVOICE'))).toEqual(['invoice.csv', 'Invoice-2024.pdf']);
    expect(names(await search('q=voice-20'))).toEqual(['Invoice-2024.pdf']);
    expect(names(await search('q=zzz'))).toEqual([]);
  });

  test('regular-expression characters in q match themselves only', async () => {
    expect(names(await search('q=a.c'))).toEqual(['a.c(1)+[x].txt']);
    expect(names(await search(`q=${encodeURIComponent('c(1)+[x]')}`))).toEqual(['a.c(1)+[x].txt']);
    expect(names(await search(`q=${encodeURIComponent('.*')}`))).toEqual([]);
    expect(names(await search(`q=${encodeURIComponent('^abc')}`))).toEqual([]);
  });

  test('type is an exact MIME type, or a prefix with /*', async () => {
    expect(names(await search('type=application/pdf'))).toEqual(['Invoice-2024.pdf']);
    expect(names(await search('type=text/*'))).toEqual(['notes.txt', 'abc.txt', 'a.c(1)+[x].txt', 'invoice.csv']);
    expect(names(await search('type=image/*'))).toEqual(['photo.png']);
    expect(names(await search('type=text/plain'))).toEqual(['notes.txt', 'abc.txt', 'a.c(1)+[x].txt']);
    expect(names(await search('type=image/jpeg'))).toEqual([]);
  });

  test('min_size and max_size are inclusive byte bounds', async () => {
    expect(names(await search('min_size=1000'))).toEqual(['abc.txt', 'Invoice-2024.pdf']);
    expect(names(await search('max_size=10'))).toEqual(['notes.txt', 'a.c(1)+[x].txt']);
    expect(names(await search('min_size=100&max_size=1000'))).toEqual(['invoice.csv', 'Invoice-2024.pdf']);
    expect(names(await search('min_size=0&max_size=0'))).toEqual(['notes.txt']);
  });

  test('filters combine, and results page newest first', async () => {
    expect(names(await search('q=invoice&type=text/*'))).toEqual(['invoice.csv']);
    expect(names(await search('q=.txt&type=text/plain&min_size=10'))).toEqual(['abc.txt', 'a.c(1)+[x].txt']);
    const first = (await search('type=text/*&limit=3')).json();
    const second = (await search(`type=text/*&limit=3&cursor=${first.next_cursor}`)).json();
    expect([...first.data, ...second.data].map((f: { name: string }) => f.name)).toEqual(['notes.txt', 'abc.txt', 'a.c(1)+[x].txt', 'invoice.csv']);
    expect(second.next_cursor).toBeNull();
    expect(names(await search(''))).toHaveLength(6);
  });

  test('bad parameters → 400', async () => {
    expectError(await search('min_size=10&max_size=5'), 400, 'querystring.min_size must not be greater than querystring.max_size');
    expectError(await search('min_size=-1'), 400, /min_size/);
    expectError(await search('max_size=1.5'), 400, /max_size/);
    expectError(await search('min_size=big'), 400, /min_size/);
    expectError(await search('type=image'), 400, /type/);
    expectError(await search('type=*/*'), 400, /type/);
    expectError(await search('q='), 400, /q/);
    expectError(await search('name=x'), 400, /unknown field 'name'/);
  });
});

describe('GET /files/:id and /files/:id/download', () => {
  const content = randomBytes(1000);
  let file: Awaited<ReturnType<typeof uploaded>>;
  beforeAll(async () => {
    file = await uploaded(app, owner.apiKey, "Résumé 100% (v2)'s.bin", content, '/dl');
  });
  const download = (headers: Record<string, string> = {}, method: 'GET' | 'HEAD' = 'GET') =>
    app.inject({ method, url: `/api/v1/files/${file.id}/download`, headers: { ...auth(owner.apiKey), ...headers } });

  test('Content-Disposition: quotes and backslashes never break the ASCII filename', () => {
    expect(contentDisposition('a"b\\c.txt')).toBe(`attachment; filename="a_b_c.txt"; filename*=UTF-8''a%22b%5Cc.txt`);
    expect(contentDisposition('日本.txt')).toBe(`attachment; filename="__.txt"; filename*=UTF-8''%E6%97%A5%E6%9C%AC.txt`);
  });

  test('GET /files/:id answers the record', async () => {
    const res = await get(`/files/${file.id}`);
    expect(res.statusCode).toBe(200);
    expect(res.json().data).toEqual(file);
  });

  test('the whole file with its headers; event file.downloaded and audit file.download', async () => {
    const res = await download();
    expect(res.statusCode).toBe(200);
    expect(res.rawPayload.equals(content)).toBe(true);
    expect(res.headers).toMatchObject({
      'content-type': 'application/octet-stream',
      'content-length': '1000',
      etag: `"${createHash('sha256').update(content).digest('hex')}"`,
      'accept-ranges': 'bytes',
      'last-modified': new Date(file.created_at).toUTCString(),
      'content-disposition': `attachment; filename="R_sum_ 100_ (v2)'s.bin"; filename*=UTF-8''R%C3%A9sum%C3%A9%20100%25%20%28v2%29%27s.bin`,
      'x-content-type-options': 'nosniff',
      'content-security-policy': "default-src 'none'; sandbox",
    });
    const events = (await eventsOf(app, owner.accountId, 'file.downloaded')).filter((e) => (e.data as { id: string }).id === file.id);
    expect(events.at(-1)!.data).toEqual({ id: file.id, name: file.name, size: 1000, via: 'api' });
    const audits = (await auditsOf(app, owner.accountId, 'file.download')).filter((a) => a.resource?.id === file.id);
    expect(audits.at(-1)).toMatchObject({ outcome: 'success', actor: { type: 'api_key' }, details: { name: file.name, size: 1000, via: 'api' } });
  });

  test.each([
    ['bytes=0-9', 0, 9],
    ['bytes=990-', 990, 999],
    ['bytes=-10', 990, 999],
    ['bytes=995-5000', 995, 999],
    ['bytes=-5000', 0, 999],
  ])('Range %s → 206 with those bytes and Content-Range', async (range, start, end) => {
    const res = await download({ range });
    expect(res.statusCode).toBe(206);
    expect(res.headers['content-range']).toBe(`bytes ${start}-${end}/1000`);
    expect(res.headers['content-length']).toBe(String(end - start + 1));
    expect(res.rawPayload.equals(content.subarray(start, end + 1))).toBe(true);
  });

  test('an unsatisfiable range → 416 with Content-Range bytes */size', async () => {
    for (const range of ['bytes=1000-', 'bytes=5000-6000', 'bytes=-0']) {
      const res = await download({ range });
      expectError(res, 416, /outside the file's 1000 bytes/);
      expect(res.headers['content-range']).toBe('bytes */1000');
    }
  });

  test('several ranges, other units and malformed ranges get the whole file (200)', async () => {
    for (const range of ['bytes=0-1,5-6', 'items=0-1', 'bytes=5-2', 'bytes=abc', 'bytes=-']) {
      const res = await download({ range });
      expect({ range, status: res.statusCode }).toEqual({ range, status: 200 });
      expect(res.rawPayload.equals(content)).toBe(true);
    }
  });

  test('If-None-Match with the ETag → 304 without a body and without a download event', async () => {
    const etag = `"${file.sha256}"`;
    const before = (await eventsOf(app, owner.accountId, 'file.downloaded')).length;
    for (const inm of [etag, `W/${etag}`, `"other", ${etag}`, '*']) {
      const res = await download({ 'if-none-match': inm });
      expect(res.statusCode).toBe(304);
      expect(res.rawPayload).toHaveLength(0);
      expect(res.headers.etag).toBe(etag);
    }
    expect((await eventsOf(app, owner.accountId, 'file.downloaded')).length).toBe(before);
    expect((await download({ 'if-none-match': '"other"' })).statusCode).toBe(200);
    expect((await download({ 'if-modified-since': new Date(Date.parse(file.created_at) + 1000).toUTCString() })).statusCode).toBe(304);
    expect((await download({ 'if-modified-since': new Date(Date.parse(file.created_at) - 5000).toUTCString() })).statusCode).toBe(200);
  });

  test('If-Range: the range applies only when it names this content', async () => {
    const etag = `"${file.sha256}"`;
    expect((await download({ range: 'bytes=0-9', 'if-range': etag })).statusCode).toBe(206);
    expect((await download({ range: 'bytes=0-9', 'if-range': new Date(file.created_at).toUTCString() })).statusCode).toBe(206);
    for (const ifRange of ['"stale"', `W/${etag}`, 'Mon, 01 Jan 2001 00:00:00 GMT']) {
      const res = await download({ range: 'bytes=0-9', 'if-range': ifRange });
      expect(res.statusCode).toBe(200);
      expect(res.rawPayload).toHaveLength(1000);
    }
  });

  test('HEAD gives the headers without content and counts no download', async () => {
    const before = (await auditsOf(app, owner.accountId, 'file.download')).length;
    const res = await download({}, 'HEAD');
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-length']).toBe('1000');
    expect(res.rawPayload).toHaveLength(0);
    expect((await auditsOf(app, owner.accountId, 'file.download')).length).toBe(before);
  });

  test('content missing from the store → 503 File content unavailable', async () => {
    const lost = await uploaded(app, owner.apiKey, 'lost.bin', 'soon gone');
    const stored = await app.db.files.findById(lost.id).lean();
    if (app.config.fileStore.kind !== 'local') throw new Error('local store expected');
    rmSync(join(app.config.fileStore.dir, 'objects', stored!.storage_key));
    const res = await app.inject({ method: 'GET', url: `/api/v1/files/${lost.id}/download`, headers: auth(owner.apiKey) });
    expectError(res, 503, 'File content unavailable');
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(res.headers['content-disposition']).toBeUndefined();
  });
});

describe('DELETE /files/:id (soft delete)', () => {
  test('hides the file everywhere but keeps its record and content; event and audit', async () => {
    const acct = await createAccount(app);
    const file = await uploaded(app, acct.apiKey, 'secret-plans.txt', 'the plans', '/vault');
    const keep = await uploaded(app, acct.apiKey, 'other.txt', 'other', '/vault');
    const filesBefore = storedFiles(app);
    const res = await app.inject({ method: 'DELETE', url: `/api/v1/files/${file.id}`, headers: auth(acct.apiKey) });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ data: { id: file.id, deleted: true } });

    expectError(await get(`/files/${file.id}`, acct.apiKey), 404, `File ${file.id} not found`);
    expectError(await get(`/files/${file.id}/download`, acct.apiKey), 404);
    expect(names(await get('/files?path=/vault', acct.apiKey))).toEqual(['other.txt']);
    expect(names(await get('/files?recursive=true', acct.apiKey))).toEqual(['other.txt']);
    expect(names(await get('/files/search?q=plans', acct.apiKey))).toEqual([]);
    expect(keep.id).toBeDefined();

    const record = await app.db.files.findById(file.id).lean();
    expect(record!.deleted_at).toBeInstanceOf(Date);
    expect(record!.deleted_by).toEqual({ type: 'api_key', id: expect.any(String) });
    expect(storedFiles(app)).toEqual(filesBefore);
    const events = await eventsOf(app, acct.accountId, 'file.deleted');
    expect(events.map((e) => e.data)).toEqual([{ id: file.id, name: 'secret-plans.txt', path: '/vault', size: 9, sha256: file.sha256 }]);
    const audits = await auditsOf(app, acct.accountId, 'file.delete');
    expect(audits).toHaveLength(1);
    expect(audits[0]).toMatchObject({ outcome: 'success', resource: { type: 'file', id: file.id } });

    expectError(await app.inject({ method: 'DELETE', url: `/api/v1/files/${file.id}`, headers: auth(acct.apiKey) }), 404);
    expect(await eventsOf(app, acct.accountId, 'file.deleted')).toHaveLength(1);
  });
});

describe('scopes and accounts', () => {
  let file: Awaited<ReturnType<typeof uploaded>>;
  beforeAll(async () => {
    file = await uploaded(app, owner.apiKey, 'scoped.txt', 'scoped', '/scopes');
  });

  test('files:read lists, searches, reads and downloads, but neither uploads nor deletes', async () => {
    const reader = await createKey(app, owner.apiKey, ['files:read']);
    for (const url of ['/files', '/files/search?q=scoped', `/files/${file.id}`, `/files/${file.id}/download`]) {
      expect({ url, status: (await get(url, reader)).statusCode }).toEqual({ url, status: 200 });
    }
    expectError(await app.inject({ method: 'DELETE', url: `/api/v1/files/${file.id}`, headers: auth(reader) }), 403, 'API key missing required scope');
  });

  test('files:write alone cannot read', async () => {
    const writer = await createKey(app, owner.apiKey, ['files:write']);
    for (const url of ['/files', '/files/search?q=scoped', `/files/${file.id}`, `/files/${file.id}/download`]) {
      expectError(await get(url, writer), 403, 'API key missing required scope');
    }
  });

  test("another account's file ids are 404 for every call, like unknown and malformed ids", async () => {
    const other = await createAccount(app);
    for (const id of [file.id, '0123456789abcdef01234567', 'not-an-id']) {
      expectError(await get(`/files/${id}`, other.apiKey), 404, `File ${id} not found`);
      expectError(await get(`/files/${id}/download`, other.apiKey), 404);
      expectError(await app.inject({ method: 'DELETE', url: `/api/v1/files/${id}`, headers: auth(other.apiKey) }), 404);
    }
    expect(names(await get('/files/search?q=scoped', other.apiKey))).toEqual([]);
    expect(names(await get('/files?path=/scopes', other.apiKey))).toEqual([]);
    expect((await get(`/files/${file.id}`)).statusCode).toBe(200);
  });
});
