import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { clamd as clamdService } from '../../e2e/src/services/clamd.service.js';
import { stopPid } from '../src/db/process.js';
import type { App } from '../src/app.js';
import { auth, buildTestApp, createAccount, createKey, expectError, type TestAccount } from './helper.js';
import { eventually } from './protocol-client.js';
import { auditsOf, eicar, EICAR_SIGNATURE, eventsOf, multipart, openUpload, postParts, storedFiles, testScanner, upload, uploaded } from './files-helper.js';

const NOT_MULTIPART = 'Upload must be multipart/form-data with a "file" part';
const PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==', 'base64');
const sha256 = (data: Buffer | string) => createHash('sha256').update(data).digest('hex');

let app: App;
let owner: TestAccount;

beforeAll(async () => {
  app = await buildTestApp({ scanner: testScanner() });
  owner = await createAccount(app);
});
afterAll(() => app.close());

const download = (id: string) => app.inject({ method: 'GET', url: `/api/v1/files/${id}/download`, headers: auth(owner.apiKey) });
const fileCount = (accountId: string) => app.db.files.countDocuments({ account_id: accountId });

/** A port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

describe('POST /files/upload: a clean file', () => {
  test('is stored, recorded and downloads byte-identical; event file.uploaded and audit success', async () => {
    const before = storedFiles(app);
    const content = randomBytes(300_000);
    const res = await upload(app, owner.apiKey, 'report.bin', content, '/docs');
    expect(res.statusCode).toBe(201);
    const file = res.json().data;
    expect(Object.keys(file).sort()).toEqual(['created_at', 'id', 'mime_type', 'name', 'path', 'sha256', 'size', 'uploaded_by']);
    expect(file).toMatchObject({ name: 'report.bin', path: '/docs', size: content.length, sha256: sha256(content), mime_type: 'application/octet-stream' });
    expect(file.uploaded_by).toEqual({ type: 'api_key', id: expect.any(String) });
    const added = storedFiles(app).filter((f) => !before.includes(f));
    expect(added).toHaveLength(1);
    expect(added[0]).toMatch(/^objects\//);

    const got = await download(file.id);
    expect(got.statusCode).toBe(200);
    expect(got.rawPayload.equals(content)).toBe(true);

    const [event] = (await eventsOf(app, owner.accountId, 'file.uploaded')).filter((e) => (e.data as { id: string }).id === file.id);
    expect(event!.data).toEqual(file);
    const audits = (await auditsOf(app, owner.accountId, 'file.upload')).filter((a) => a.resource?.id === file.id);
    expect(audits).toHaveLength(1);
    expect(audits[0]).toMatchObject({ outcome: 'success', details: { name: 'report.bin', path: '/docs', size: content.length, sha256: sha256(content) } });
  });

  test('concurrent uploads keep their own bytes, hashes and records', async () => {
    const bodies = Array.from({ length: 6 }, (_, i) => randomBytes(200_000 + i * 50_000));
    const files = await Promise.all(bodies.map((body, i) => uploaded(app, owner.apiKey, `parallel-${i}.bin`, body, '/parallel')));
    for (const [i, file] of files.entries()) {
      expect(file).toMatchObject({ name: `parallel-${i}.bin`, size: bodies[i]!.length, sha256: sha256(bodies[i]!) });
      expect((await download(file.id)).rawPayload.equals(bodies[i]!)).toBe(true);
    }
  });

  test('MIME type comes from the content first, then the extension, else application/octet-stream', async () => {
    expect((await uploaded(app, owner.apiKey, 'picture.txt', PNG)).mime_type).toBe('image/png');
    expect((await uploaded(app, owner.apiKey, 'doc.bin', Buffer.from('%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<<>>\nendobj\n', 'latin1'))).mime_type).toBe('application/pdf');
    expect((await uploaded(app, owner.apiKey, 'table.CSV', 'a,b\n1,2\n')).mime_type).toBe('text/csv');
    expect((await uploaded(app, owner.apiKey, 'noext', 'plain words')).mime_type).toBe('application/octet-stream');
    expect((await uploaded(app, owner.apiKey, 'empty.json', '')).mime_type).toBe('application/json');
  });

  test('an empty file is a file (size 0, the SHA-256 of nothing)', async () => {
    const file = await uploaded(app, owner.apiKey, 'zero.dat', '');
    expect(file).toMatchObject({ size: 0, sha256: sha256('') });
    const got = await download(file.id);
    expect(got.statusCode).toBe(200);
    expect(got.rawPayload).toHaveLength(0);
  });

  test('path defaults to /, is normalized, and may come after the file part', async () => {
    expect((await uploaded(app, owner.apiKey, 'a.txt', 'x')).path).toBe('/');
    expect((await uploaded(app, owner.apiKey, 'b.txt', 'x', '/a//b/./c/')).path).toBe('/a/b/c');
    const after = await postParts(app, owner.apiKey, [{ name: 'file', filename: 'c.txt', content: 'late path' }, { name: 'path', content: '/later/' }]);
    expect(after.statusCode).toBe(201);
    expect(after.json().data.path).toBe('/later');
  });

  test('names keep Unicode and spaces; the same name twice in one folder gives two files', async () => {
    const first = await uploaded(app, owner.apiKey, 'Résumé 2024 (final).txt', 'one', '/dupes');
    const second = await uploaded(app, owner.apiKey, 'Résumé 2024 (final).txt', 'two', '/dupes');
    expect(first.id).not.toBe(second.id);
    expect(first.name).toBe('Résumé 2024 (final).txt');
    const list = await app.inject({ method: 'GET', url: '/api/v1/files?path=/dupes', headers: auth(owner.apiKey) });
    expect(list.json().data.map((f: { id: string }) => f.id)).toEqual([second.id, first.id]);
    expect((await download(first.id)).body).toBe('one');
    expect((await download(second.id)).body).toBe('two');
  });
});

describe('POST /files/upload: malware', () => {
  test('EICAR → 422 with the signature; nothing stored; event file.scan_blocked and audit denied', async () => {
    const acct = await createAccount(app);
    const before = storedFiles(app);
    const bytes = eicar();
    const res = await upload(app, acct.apiKey, 'totally-safe.com', bytes, '/inbox');
    expectError(res, 422, /^File rejected: malware detected \((.+)\)$/);
    const signature = EICAR_SIGNATURE;
    expect(res.json().error).toBe(`File rejected: malware detected (${signature})`);
    expect(storedFiles(app)).toEqual(before);
    expect(await fileCount(acct.accountId)).toBe(0);

    const events = await eventsOf(app, acct.accountId, 'file.scan_blocked');
    expect(events.map((e) => e.data)).toEqual([{ name: 'totally-safe.com', path: '/inbox', size: bytes.length, sha256: sha256(bytes), signature }]);
    const audits = await auditsOf(app, acct.accountId, 'file.upload');
    expect(audits).toHaveLength(1);
    expect(audits[0]).toMatchObject({ outcome: 'denied', details: { name: 'totally-safe.com', signature } });
    expect(await eventsOf(app, acct.accountId, 'file.uploaded')).toHaveLength(0);
  });

  test('EICAR inside a 3 MB file is found while it streams; nothing stored', async () => {
    const acct = await createAccount(app);
    const before = storedFiles(app);
    const body = Buffer.concat([randomBytes(1_500_000), eicar(), randomBytes(1_500_000)]);
    expectError(await upload(app, acct.apiKey, 'archive.bin', body), 422, `File rejected: malware detected (${EICAR_SIGNATURE})`);
    expect(storedFiles(app)).toEqual(before);
    expect(await fileCount(acct.accountId)).toBe(0);
  });

  test('malware wins over a bad part after it: 422 and the event, not 400', async () => {
    const acct = await createAccount(app);
    const res = await postParts(app, acct.apiKey, [{ name: 'file', filename: 'x.com', content: eicar() }, { name: 'owner', content: 'me' }]);
    expectError(res, 422, `File rejected: malware detected (${EICAR_SIGNATURE})`);
    expect(await eventsOf(app, acct.accountId, 'file.scan_blocked')).toHaveLength(1);
    expect(await fileCount(acct.accountId)).toBe(0);
  });

  test('EICAR with the path part after the file is still blocked, in that folder', async () => {
    const acct = await createAccount(app);
    const res = await postParts(app, acct.apiKey, [{ name: 'file', filename: 'x.com', content: eicar() }, { name: 'path', content: '/late' }]);
    expectError(res, 422, /^File rejected: malware detected/);
    expect((await eventsOf(app, acct.accountId, 'file.scan_blocked'))[0]!.data).toMatchObject({ path: '/late' });
    expect(await fileCount(acct.accountId)).toBe(0);
  });
});

describe('POST /files/upload: failures keep nothing', () => {
  test('scanner unreachable → 503, nothing stored, audit failure (fail closed)', async () => {
    const down = await buildTestApp({ scanner: { kind: 'clamd', address: { host: '127.0.0.1', port: await closedPort() }, timeoutMs: 2000 } });
    try {
      const acct = await createAccount(down);
      const res = await upload(down, acct.apiKey, 'clean.txt', randomBytes(200_000));
      expectError(res, 503, /^Malware scanner unavailable/);
      expect(storedFiles(down)).toEqual([]);
      expect(await down.db.files.countDocuments({})).toBe(0);
      const audits = await auditsOf(down, acct.accountId, 'file.upload');
      expect(audits.map((a) => a.outcome)).toEqual(['failure']);
    } finally {
      await down.close();
    }
  });

  test('a clamd that stops: clean uploads work while it runs, then 503 with nothing stored', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'xfer-files-clamd-'));
    const started = await clamdService.start({ dataDir, cacheDir: tmpdir(), env: process.env, log: () => {} });
    let pid = started.pid;
    const [host, port] = started.env.XFER_TEST_CLAMD!.split(':');
    const own = await buildTestApp({ scanner: { kind: 'clamd', address: { host: host!, port: Number(port) }, timeoutMs: 5000 } });
    try {
      const acct = await createAccount(own);
      expect((await upload(own, acct.apiKey, 'before.txt', 'scanned while clamd runs')).statusCode).toBe(201);
      const kept = storedFiles(own);
      await stopPid(pid);
      pid = 0;
      for (const body of [Buffer.from('clean'), eicar(), randomBytes(1_000_000)]) {
        expectError(await upload(own, acct.apiKey, 'after.bin', body), 503, /^Malware scanner unavailable/);
      }
      expect(storedFiles(own)).toEqual(kept);
      expect(await own.db.files.countDocuments({})).toBe(1);
    } finally {
      await own.close();
      if (pid) await stopPid(pid);
      await rm(dataDir, { recursive: true, force: true });
    }
  });

  test('over config.uploadMaxBytes → 413 naming the limit, nothing stored; the limit itself is accepted', async () => {
    const small = await buildTestApp({ scanner: testScanner(), uploadMaxBytes: 1000 });
    try {
      const acct = await createAccount(small);
      expectError(await upload(small, acct.apiKey, 'big.bin', randomBytes(1001)), 413, 'File exceeds the upload limit of 1000 bytes');
      expectError(await upload(small, acct.apiKey, 'bigger.bin', randomBytes(500_000)), 413, 'File exceeds the upload limit of 1000 bytes');
      expect(storedFiles(small)).toEqual([]);
      expect(await small.db.files.countDocuments({})).toBe(0);
      expect((await upload(small, acct.apiKey, 'exact.bin', randomBytes(1000))).statusCode).toBe(201);
    } finally {
      await small.close();
    }
  });

  test('a client that disconnects mid-upload leaves no content and no record', async () => {
    const live = await buildTestApp({ scanner: testScanner() });
    try {
      const acct = await createAccount(live);
      await live.listen({ port: 0, host: '127.0.0.1' });
      const { port } = live.server.address() as AddressInfo;
      const { req } = openUpload(port, acct.apiKey, 'partial.bin');
      const closed = new Promise<void>((resolve) => { req.on('error', () => resolve()); req.on('close', () => resolve()); });
      for (let i = 0; i < 16; i++) req.write(randomBytes(64 * 1024));
      // Wait until the store holds temporary content: the upload is under way.
      await eventually(async () => storedFiles(live).some((f) => f.startsWith('tmp/')), 'temporary content stored');
      req.destroy();
      await closed;
      await eventually(async () => storedFiles(live).length === 0, 'the temporary content removed');
      expect(await live.db.files.countDocuments({})).toBe(0);
      // The audit record is written once the upload has been cleaned up.
      const audits = await eventually(async () => {
        const found = await auditsOf(live, acct.accountId, 'file.upload');
        return found.length > 0 && found;
      }, 'the upload audited');
      expect(audits.map((a) => [a.outcome, (a.details as { reason: string }).reason])).toEqual([['failure', 'Upload ended before the multipart body was complete']]);
    } finally {
      await live.close();
    }
  });
});

test('an upload refused before its body has arrived (413) answers at once and closes the connection', async () => {
  const small = await buildTestApp({ scanner: testScanner(), uploadMaxBytes: 1000 });
  try {
    const acct = await createAccount(small);
    await small.listen({ port: 0, host: '127.0.0.1' });
    const { port } = small.server.address() as AddressInfo;
    const { req } = openUpload(port, acct.apiKey, 'big.bin', 1024 * 1024);
    const answered = new Promise<{ status: number; connection: string | undefined }>((resolve) => {
      req.on('response', (res) => { res.resume(); resolve({ status: res.statusCode!, connection: res.headers.connection }); });
    });
    const closed = new Promise<void>((resolve) => req.on('socket', (socket) => socket.once('close', () => resolve())));
    req.on('error', () => undefined);
    req.write(randomBytes(5000));
    // The rest of the declared megabyte never comes: only closing the connection frees the client.
    expect(await answered).toEqual({ status: 413, connection: 'close' });
    await closed;
    expect(storedFiles(small)).toEqual([]);
  } finally {
    await small.close();
  }
});

describe('a body that stops arriving (XFER_BODY_IDLE_TIMEOUT_MS)', () => {
  const IDLE_MS = 600;
  let live: App;
  let acct: TestAccount;
  let port: number;
  beforeAll(async () => {
    live = await buildTestApp({ scanner: testScanner(), bodyIdleTimeoutMs: IDLE_MS });
    acct = await createAccount(live);
    await live.listen({ port: 0, host: '127.0.0.1' });
    port = (live.server.address() as AddressInfo).port;
  });
  afterAll(() => live.close());

  /** Sends the head of a multipart upload, then `chunks` 64 KiB chunks `gapMs` apart; resolves with the status, or 'closed'. */
  function trickle(chunks: number, gapMs: number, finish: boolean): Promise<number | 'closed'> {
    const { req, closing } = openUpload(port, acct.apiKey, 'slow.bin');
    const outcome = new Promise<number | 'closed'>((resolve) => {
      req.on('response', (res) => { res.resume(); res.on('end', () => resolve(res.statusCode!)); });
      req.on('error', () => resolve('closed'));
    });
    void (async () => {
      for (let i = 0; i < chunks && !req.destroyed; i++) {
        req.write(randomBytes(64 * 1024));
        await new Promise((r) => setTimeout(r, gapMs));
      }
      if (finish && !req.destroyed) req.end(closing);
    })();
    return outcome;
  }

  test('a client that stalls mid-upload has its connection closed and nothing is kept', async () => {
    const started = Date.now();
    expect(await trickle(4, 20, false)).toBe('closed');
    expect(Date.now() - started).toBeGreaterThanOrEqual(IDLE_MS);
    await eventually(async () => storedFiles(live).length === 0, 'the temporary content removed');
    expect(await live.db.files.countDocuments({})).toBe(0);
  });

  test('an upload that keeps coming, with pauses shorter than the limit, may take far longer than it and is stored', async () => {
    const started = Date.now();
    expect(await trickle(12, IDLE_MS / 3, true)).toBe(201);
    expect(Date.now() - started).toBeGreaterThan(3 * IDLE_MS);
    expect(await live.db.files.countDocuments({ name: 'slow.bin' })).toBe(1);
  });
});

describe('POST /files/upload: every bad input is a 4xx {error} and keeps nothing', () => {
  const json = (payload: unknown, type = 'application/json') => app.inject({
    method: 'POST', url: '/api/v1/files/upload', headers: { ...auth(owner.apiKey), 'content-type': type }, payload: JSON.stringify(payload),
  });

  let before: string[];
  let records: number;
  beforeEach(async () => {
    before = storedFiles(app);
    records = await fileCount(owner.accountId);
  });
  afterEach(async () => {
    expect(storedFiles(app)).toEqual(before);
    expect(await fileCount(owner.accountId)).toBe(records);
  });

  test('a body that is not multipart → 415', async () => {
    expectError(await json({ file: 'x' }), 415, NOT_MULTIPART);
    expectError(await json('x', 'text/plain'), 415, NOT_MULTIPART);
    expectError(await app.inject({ method: 'POST', url: '/api/v1/files/upload', headers: auth(owner.apiKey) }), 415, NOT_MULTIPART);
  });

  test('malformed multipart → 400', async () => {
    expectError(await app.inject({
      method: 'POST', url: '/api/v1/files/upload', headers: { ...auth(owner.apiKey), 'content-type': 'multipart/form-data' }, payload: 'x',
    }), 400, /multipart/i);
    const { payload, headers } = multipart([{ name: 'file', filename: 'cut.bin', content: randomBytes(5000) }]);
    expectError(await app.inject({
      method: 'POST', url: '/api/v1/files/upload', headers: { ...auth(owner.apiKey), ...headers }, payload: payload.subarray(0, 3000),
    }), 400);
  });

  test('no file part, a text part named file, two file parts, a file part with another name → 400', async () => {
    expectError(await postParts(app, owner.apiKey, [{ name: 'path', content: '/a' }]), 400, 'Upload has no "file" part');
    expectError(await postParts(app, owner.apiKey, []), 400, 'Upload has no "file" part');
    expectError(await postParts(app, owner.apiKey, [{ name: 'file', content: 'text, no filename' }]), 400, /"file" must be a file/);
    expectError(await postParts(app, owner.apiKey, [
      { name: 'file', filename: 'one.txt', content: 'one' }, { name: 'file', filename: 'two.txt', content: 'two' },
    ]), 400, 'Upload takes exactly one file part (named "file")');
    expectError(await postParts(app, owner.apiKey, [{ name: 'document', filename: 'one.txt', content: 'one' }]), 400, /must be named "file"/);
  });

  test('unknown fields and a repeated path → 400', async () => {
    expectError(await postParts(app, owner.apiKey, [{ name: 'owner', content: 'me' }, { name: 'file', filename: 'a.txt', content: 'a' }]), 400, /unknown part "owner"/);
    expectError(await postParts(app, owner.apiKey, [{ name: 'file', filename: 'a.txt', content: 'a' }, { name: 'owner', content: 'me' }]), 400);
    expectError(await postParts(app, owner.apiKey, [
      { name: 'path', content: '/a' }, { name: 'path', content: '/b' }, { name: 'file', filename: 'a.txt', content: 'a' },
    ]), 400, 'Upload takes only the parts "file" and "path"');
  });

  test.each([
    ['../etc', /must start with '\/'/],
    ['relative/dir', /must start with '\/'/],
    ['/a/../b', /'\.\.'/],
    ['/..', /'\.\.'/],
    ['/a\\b', /backslash/],
    ['/a\u0000b', /NUL/],
    ['/a\u0007b', /control/],
    ['/a\nb', /control/],
    ['', /must start with '\/'/],
    [`/${'d'.repeat(256)}`, /longer than 255 bytes/],
    [`/${'d/'.repeat(600)}`, /at most 1024 characters/],
    [`/${'d'.repeat(5000)}`, /at most 4096 bytes/],
  ])('path %j → 400 naming the field, before or after the file part', async (path, message) => {
    const res = await upload(app, owner.apiKey, 'ok.txt', 'x', path);
    expectError(res, 400, message);
    expect(res.json().error).toMatch(/path/);
    expectError(await postParts(app, owner.apiKey, [{ name: 'file', filename: 'ok.txt', content: randomBytes(70_000) }, { name: 'path', content: path }]), 400, message);
  });

  test('a "path" or a "file" part sent twice → 400 naming it, and nothing is kept', async () => {
    const before = await fileCount(owner.accountId);
    for (const parts of [
      [{ name: 'path', content: '/a' }, { name: 'path', content: '/b' }, { name: 'file', filename: 'twice.txt', content: 'x' }],
      [{ name: 'file', filename: 'twice.txt', content: 'x' }, { name: 'path', content: '/a' }, { name: 'path', content: '/b' }],
      [{ name: 'path', content: '/a' }, { name: 'file', filename: 'twice.txt', content: 'x' }, { name: 'path', content: '/b' }],
    ]) {
      const res = await postParts(app, owner.apiKey, parts);
      expect({ status: res.statusCode, error: res.json().error }).toEqual({ status: 400, error: expect.stringMatching(/"path"/) });
    }
    expectError(await postParts(app, owner.apiKey, [
      { name: 'file', filename: 'one.txt', content: randomBytes(70_000) }, { name: 'file', filename: 'two.txt', content: 'y' },
    ]), 400, 'Upload takes exactly one file part (named "file")');
    expect(await fileCount(owner.accountId)).toBe(before);
  });

  test.each([
    ['', /must not be empty/],
    ['.', /must not be '\.' or '\.\.'/],
    ['..', /must not be '\.' or '\.\.'/],
    ['a/b.txt', /single name/],
    ['../up.txt', /single name/],
    ['a\\b.txt', /single name/],
    ['nul\u0000.txt', /NUL/],
    ['tab\u0009.txt', /control/],
    ['n'.repeat(256), /at most 255 bytes/],
    ['é'.repeat(128), /at most 255 bytes/],
  ])('file name %j → 400 naming the file name', async (name, message) => {
    const res = await upload(app, owner.apiKey, name, 'x');
    expectError(res, 400, message);
    expect(res.json().error).toMatch(/^Upload file name/);
  });

  test('a key without files:write → 403, and no credentials → 401', async () => {
    const reader = await createKey(app, owner.apiKey, ['files:read']);
    expectError(await upload(app, reader, 'a.txt', 'x'), 403, 'API key missing required scope');
    const { payload, headers } = multipart([{ name: 'file', filename: 'a.txt', content: 'x' }]);
    expectError(await app.inject({ method: 'POST', url: '/api/v1/files/upload', headers, payload }), 401);
  });
});
