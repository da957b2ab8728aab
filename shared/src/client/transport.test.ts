import { ApiError, exitCodeOf, TransferFailedError, type ApiErrorKind } from './errors.js';
import { XferClient, type XferClientOptions } from './client.js';
import { parseRetryAfter, retryDelayMs, DEFAULT_BACKOFF } from './retry.js';
import type { RetryInfo } from './transport.js';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { json, readBody, refusedBaseUrl, serve, type Handler, type TestServer } from './test-server.js';

/** Retries, timeouts, aborts and error mapping of the request core, over real HTTP. */
let server: TestServer | undefined;
afterEach(async () => { await server?.close(); server = undefined; });

async function client(handler: Handler, opts: Partial<XferClientOptions> = {}): Promise<{ c: XferClient; retries: RetryInfo[] }> {
  server = await serve(handler);
  const retries: RetryInfo[] = [];
  const c = new XferClient({
    baseUrl: server.baseUrl, token: 'svc_test', backoff: { baseMs: 20 }, onRetry: (i) => retries.push(i), ...opts,
  });
  return { c, retries };
}

/** The error a promise rejects with (fails the test when it resolves). */
async function failure(p: Promise<unknown>): Promise<ApiError> {
  const err = await p.then(() => { throw new Error('expected the call to fail'); }, (e: unknown) => e);
  expect(err).toBeInstanceOf(ApiError);
  return err as ApiError;
}

describe('Retry-After', () => {
  it('reads delta-seconds and HTTP dates, and nothing else', () => {
    const now = Date.parse('2026-11-23T10:00:00Z');
    expect(parseRetryAfter('7', now)).toBe(7000);
    expect(parseRetryAfter('Mon, 23 Nov 2026 10:00:05 GMT', now)).toBe(5000);
    expect(parseRetryAfter('Mon, 23 Nov 2026 09:00:00 GMT', now)).toBe(0);
    expect(parseRetryAfter('soon', now)).toBeUndefined();
    expect(parseRetryAfter(null, now)).toBeUndefined();
  });

  it('waits the seconds a 429 asks before trying again, then succeeds', async () => {
    const { c, retries } = await client((_req, res, n) => (n === 1
      ? json(res, 429, { error: 'Rate limit exceeded, retry later' }, { 'retry-after': '1' })
      : json(res, 200, { data: [{ id: 'k1' }], next_cursor: null })));
    const started = Date.now();
    const page = await c.apiKeys.list();
    expect(Date.now() - started).toBeGreaterThanOrEqual(1000);
    expect(page.data).toEqual([{ id: 'k1' }]);
    expect(retries).toHaveLength(1);
    expect(retries[0]!.delayMs).toBeGreaterThanOrEqual(1000);
    expect(retries[0]!.delayMs).toBeLessThan(1000 + 20);
    expect(retries[0]!.error.kind).toBe('rate_limited');
  });

  it('waits until the HTTP date a 503 names', async () => {
    const { c, retries } = await client((_req, res, n) => (n === 1
      ? json(res, 503, { error: 'Database unavailable, retry later' }, { 'retry-after': new Date(Date.now() + 2000).toUTCString() })
      : json(res, 200, { status: 'ok' })));
    const started = Date.now();
    await expect(c.health()).resolves.toEqual({ status: 'ok' });
    // An HTTP date has whole seconds: the wait is between 1 and 2 s.
    expect(retries[0]!.delayMs).toBeGreaterThan(900);
    expect(retries[0]!.delayMs).toBeLessThanOrEqual(2000 + 20);
    expect(Date.now() - started).toBeGreaterThanOrEqual(retries[0]!.delayMs - 5);
  });

  it('fails at once, with the figure, when Retry-After is longer than it will wait', async () => {
    const { c, retries } = await client((_req, res) => json(res, 429, { error: 'Rate limit exceeded, retry later' }, { 'retry-after': '3600' }));
    const err = await failure(c.connections.list());
    expect(err.retryAfterSeconds).toBe(3600);
    expect(retries).toHaveLength(0);
    expect(server!.requests).toHaveLength(1);
  });
});

describe('backoff', () => {
  it('is a random share of a ceiling that doubles per retry and stops at maxMs, above Retry-After', () => {
    const opts = { ...DEFAULT_BACKOFF, baseMs: 100, maxMs: 1000 };
    expect(retryDelayMs(1, undefined, opts, () => 0)).toBe(0);
    expect(retryDelayMs(1, undefined, opts, () => 0.999)).toBe(99);
    expect(retryDelayMs(3, undefined, opts, () => 0.999)).toBe(399);
    expect(retryDelayMs(10, undefined, opts, () => 0.999)).toBe(999);
    expect(retryDelayMs(2, 5000, opts, () => 0.5)).toBe(5100);
  });

  it('retries a 503 without Retry-After within the growing bounds, then gives up as unavailable (exit 6)', async () => {
    const { c, retries } = await client((_req, res) => json(res, 503, { error: 'Database unavailable, retry later' }), { retries: 3 });
    const err = await failure(c.transfers.get('t1'));
    expect(server!.requests).toHaveLength(4);
    expect(retries.map((r) => r.attempt)).toEqual([1, 2, 3]);
    retries.forEach((r, i) => {
      expect(r.delayMs).toBeGreaterThanOrEqual(0);
      expect(r.delayMs).toBeLessThan(20 * 2 ** i);
    });
    expect(err).toMatchObject({ kind: 'unavailable', status: 503, attempts: 4, message: 'Database unavailable, retry later' });
    expect(exitCodeOf(err)).toBe(6);
  });

  it('gives up on a 429 after `retries` more attempts as rate_limited (exit 6), POST included', async () => {
    const { c } = await client((_req, res) => json(res, 429, { error: 'Rate limit exceeded, retry later' }, { 'retry-after': '0' }), { retries: 2 });
    const err = await failure(c.connections.create({ name: 'x', type: 'nfs', host: 'h' }));
    expect(server!.requests.map((r) => r.method)).toEqual(['POST', 'POST', 'POST']);
    expect(err).toMatchObject({ kind: 'rate_limited', status: 429, attempts: 3, retryAfterSeconds: 0 });
    expect(exitCodeOf(err)).toBe(6);
  });
});

describe('network failures', () => {
  it('names the refused origin and retries a GET', async () => {
    const baseUrl = await refusedBaseUrl();
    const retries: RetryInfo[] = [];
    const c = new XferClient({ baseUrl, retries: 2, backoff: { baseMs: 5 }, onRetry: (i) => retries.push(i) });
    const err = await failure(c.files.get('f1'));
    expect(err.kind).toBe('network');
    expect(err.message).toBe(`Connection refused to ${new URL(baseUrl).origin}: is the xfer server running there?`);
    expect(retries).toHaveLength(2);
    expect(exitCodeOf(err)).toBe(6);
  });

  it('does not retry a POST whose connection broke: the server may have acted on it', async () => {
    const { c, retries } = await client((req) => req.socket.destroy());
    const err = await failure(c.transfers.cancel('t1'));
    expect(err.kind).toBe('network');
    expect(err.message).toMatch(/^Connection to http:\/\/127\.0\.0\.1:\d+ was closed unexpectedly$/);
    expect(server!.requests).toHaveLength(1);
    expect(retries).toHaveLength(0);
  });

  it('retries a DELETE whose connection broke, and succeeds', async () => {
    const { c } = await client((req, res, n) => (n === 1 ? req.socket.destroy() : json(res, 200, { data: { id: 'c1', deleted: true } })));
    await expect(c.connections.delete('c1')).resolves.toEqual({ id: 'c1', deleted: true });
    expect(server!.requests).toHaveLength(2);
  });

  it('reports a TLS failure without retrying it', async () => {
    const { retries } = await client((_req, res) => json(res, 200, {}));
    const c = new XferClient({ baseUrl: server!.baseUrl.replace('http:', 'https:'), onRetry: (i) => retries.push(i) });
    const err = await failure(c.health());
    expect(err.kind).toBe('network');
    expect(err.message).toMatch(/^TLS failure talking to https:\/\/127\.0\.0\.1:\d+: .*\(ERR_SSL_/);
    expect(retries).toHaveLength(0);
  });

  it('never retries a streamed upload, not even on 503', async () => {
    const { c, retries } = await client(async (req, res) => {
      await readBody(req);
      json(res, 503, { error: 'Malware scanner unavailable: down' });
    });
    const err = await failure(c.files.upload({ name: 'a.txt', content: [Buffer.from('hello')] }));
    expect(err).toMatchObject({ kind: 'unavailable', message: 'Malware scanner unavailable: down' });
    expect(server!.requests).toHaveLength(1);
    expect(retries).toHaveLength(0);
  });
});

describe('timeouts and abort', () => {
  const silent: Handler = () => undefined;

  it('times out each attempt, retries a GET, and says how long it waited', async () => {
    const { c, retries } = await client(silent, { timeoutMs: 200, retries: 1 });
    const err = await failure(c.users.list());
    expect(err).toMatchObject({ kind: 'timeout', status: 0, attempts: 2 });
    expect(err.message).toMatch(/^Request to http:\/\/127\.0\.0\.1:\d+ timed out after 0\.2 s$/);
    expect(retries).toHaveLength(1);
    expect(exitCodeOf(err)).toBe(6);
  });

  it('does not retry a POST that timed out', async () => {
    const { c } = await client(silent, { timeoutMs: 200, retries: 3 });
    const err = await failure(c.agents.test('a1'));
    expect(err.kind).toBe('timeout');
    expect(server!.requests).toHaveLength(1);
  });

  it('stops a request in flight when the caller aborts, with the caller\'s reason', async () => {
    const { c } = await client(silent);
    const controller = new AbortController();
    setTimeout(() => controller.abort(new Error('user pressed Ctrl-C')), 100);
    await expect(c.webhooks.list(undefined, { signal: controller.signal })).rejects.toThrow('user pressed Ctrl-C');
  });

  it('stops waiting for a retry when the caller aborts', async () => {
    const { c } = await client((_req, res) => json(res, 429, { error: 'slow down' }, { 'retry-after': '30' }));
    const started = Date.now();
    await expect(c.activity.list(undefined, { signal: AbortSignal.timeout(150) })).rejects.toMatchObject({ name: 'TimeoutError' });
    expect(Date.now() - started).toBeLessThan(2000);
    expect(server!.requests).toHaveLength(1);
  });
});

describe('status → kind → exit code', () => {
  const table: Array<[number, ApiErrorKind, number]> = [
    [400, 'invalid', 2], [401, 'unauthenticated', 3], [403, 'forbidden', 3], [404, 'not_found', 4], [409, 'conflict', 5],
    [410, 'gone', 4], [413, 'too_large', 2], [415, 'invalid', 2], [422, 'invalid', 2], [429, 'rate_limited', 6],
    [500, 'server', 1], [502, 'unavailable', 6], [503, 'unavailable', 6], [504, 'unavailable', 6],
  ];

  it.each(table)('%i is %s, exit %i, with the server\'s message and request id', async (status, kind, exit) => {
    const { c } = await client((_req, res) => json(res, status, { error: `message for ${status}` }, { 'x-request-id': 'req-7' }), { retries: 0 });
    const err = await failure(c.connections.get('c1'));
    expect(err).toMatchObject({ status, kind, message: `message for ${status}`, requestId: 'req-7', method: 'GET' });
    expect(err.url).toBe(`${server!.baseUrl}/connections/c1`);
    expect(exitCodeOf(err)).toBe(exit);
  });

  it('keeps the status line when a proxy answers without {error}', async () => {
    const { c } = await client((_req, res) => res.writeHead(502, { 'content-type': 'text/html' }).end('<h1>Bad Gateway</h1>'), { retries: 0 });
    await expect(failure(c.health())).resolves.toMatchObject({ message: 'HTTP 502 Bad Gateway', kind: 'unavailable' });
  });

  it('throws TransferFailedError (exit 7) when execute answers success false', async () => {
    const { c } = await client((_req, res) => json(res, 200, {
      success: false, files_transferred: 1, bytes_transferred: 10, status: 'failed', files_total: 3, error: 'disk full',
    }));
    const err = await c.transfers.execute('t9').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TransferFailedError);
    expect((err as TransferFailedError).message).toBe('Transfer t9 failed: disk full');
    expect((err as TransferFailedError).result.files_total).toBe(3);
    expect(exitCodeOf(err)).toBe(7);
    expect(exitCodeOf(new Error('anything else'))).toBe(1);
  });
});

describe('streamed downloads', () => {
  it('keep every byte when the caller starts reading late, after garbage collections', async () => {
    const content = Buffer.alloc(3 * 1024 * 1024, 7);
    const { c } = await client((_req, res) => { res.writeHead(200, { 'content-length': content.length }); res.end(content); });
    const download = await c.files.download('f1');
    // What a slow start does (the CLI loading its progress view): collections while the body waits.
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    for (let i = 0; i < 5; i++) {
      gc();
      await new Promise((r) => setTimeout(r, 20));
    }
    let received = 0;
    for await (const chunk of download.body) received += (chunk as Buffer).length;
    expect(received).toBe(content.length);
  });

  it('let the connection go when the caller stops reading early', async () => {
    let closed: Promise<void> | undefined;
    const { c } = await client((_req, res) => {
      closed = new Promise((resolve) => res.on('close', () => resolve()));
      res.writeHead(200, { 'content-length': 64 * 1024 * 1024 });
      const timer = setInterval(() => res.write(Buffer.alloc(64 * 1024)), 5);
      res.on('close', () => clearInterval(timer));
    });
    const download = await c.files.download('f1');
    for await (const _ of download.body) break;
    // The server sees its response end early once the client cancels the body (else: test timeout).
    await closed;
  });
});

describe('uploads refused before their body is read', () => {
  it('leave nothing behind that holds the process open (a CLI run ends once it printed the refusal)', async () => {
    // A real process: what held the CLI open after it printed a viewer's 403 for its whole timeout
    // was a timer re-armed by the body's last pull, which only shows as a process that does not end.
    server = await serve((_req, res) => json(res, 403, { error: 'This invite lets you view the room, not upload into it' }, { connection: 'close' }));
    const clientModule = new URL('../../dist/client/client.js', import.meta.url).href;
    const script = `
      import { XferClient } from ${JSON.stringify(clientModule)};
      let refused;
      const answered = new Promise((resolve) => { refused = resolve; });
      // The source's next chunk comes only after the answer: the upload's body is pulled once more after the call ended.
      async function* content() { yield Buffer.from('from the '); await answered; yield Buffer.from('partner'); }
      const c = new XferClient({ baseUrl: process.argv[1], timeoutMs: 600_000, retries: 0 });
      await c.dataRooms.contribute('invite-token', { name: 'note.txt', content: content() }).then(
        () => { process.exitCode = 9; },
        (err) => { refused(); process.stdout.write(String(err.status)); });
    `;
    const child = spawn(process.execPath, ['--input-type=module', '-e', script, server.baseUrl], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout!.on('data', (d: Buffer) => { out += d.toString(); });
    // Bounded: a process still there after 20 s is one held by the 600 s timer.
    const kill = setTimeout(() => child.kill('SIGKILL'), 20_000);
    const [code, signal] = await once(child, 'exit') as [number | null, string | null];
    clearTimeout(kill);
    expect({ code, signal, out }).toEqual({ code: 0, signal: null, out: '403' });
  });
});
