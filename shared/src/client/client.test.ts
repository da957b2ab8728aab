import { createHash } from 'node:crypto';
import { XferClient } from './client.js';
import { json, readBody, serve, type Handler, type TestServer } from './test-server.js';

/** Envelopes, paging, uploads and downloads of the client's resource methods, over real HTTP. */
let server: TestServer | undefined;
afterEach(async () => { await server?.close(); server = undefined; });

async function client(handler: Handler, timeoutMs?: number): Promise<XferClient> {
  server = await serve(handler);
  return new XferClient({ baseUrl: `${server.baseUrl}/`, token: 'svc_abc', userAgent: 'xfer-cli/1.2.3', timeoutMs, backoff: { baseMs: 5 } });
}

async function text(body: AsyncIterable<unknown>): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of body) chunks.push(Buffer.from(c as Uint8Array));
  return Buffer.concat(chunks).toString();
}

describe('envelopes', () => {
  it('sends the bearer token and JSON body, and answers the data', async () => {
    let received: unknown;
    const c = await client(async (req, res) => {
      received = JSON.parse((await readBody(req)).toString());
      json(res, 201, { data: { id: 'c1', name: 'n' } });
    });
    await expect(c.connections.create({ name: 'n', type: 'sftp', host: 'h', credentials: { username: 'u', password: 'p' } }))
      .resolves.toEqual({ id: 'c1', name: 'n' });
    expect(received).toEqual({ name: 'n', type: 'sftp', host: 'h', credentials: { username: 'u', password: 'p' } });
    const seen = server!.requests[0]!;
    expect(seen).toMatchObject({ method: 'POST', url: '/api/v1/connections' });
    expect(seen.headers).toMatchObject({ authorization: 'Bearer svc_abc', 'content-type': 'application/json', 'user-agent': 'xfer-cli/1.2.3' });
  });

  it('keeps the one-time warning beside the data of a create', async () => {
    const c = await client((_req, res) => json(res, 201, { data: { id: 'k', key: 'svc_new' }, warning: 'Store this key now: it cannot be shown again.' }));
    await expect(c.apiKeys.create({ name: 'ci', scopes: ['files:read'] }))
      .resolves.toEqual({ data: { id: 'k', key: 'svc_new' }, warning: 'Store this key now: it cannot be shown again.' });
  });

  it('answers the bare bodies of health (unauthenticated) and execute', async () => {
    const c = await client((req, res) => (req.url === '/api/v1/health'
      ? json(res, 200, { status: 'ok' })
      : json(res, 200, { success: true, files_transferred: 2, bytes_transferred: 20 })));
    await expect(c.health()).resolves.toEqual({ status: 'ok' });
    await expect(c.transfers.execute('t1')).resolves.toEqual({ success: true, files_transferred: 2, bytes_transferred: 20 });
    expect(server!.requests[0]!.headers.authorization).toBeUndefined();
    expect(server!.requests[1]!).toMatchObject({ method: 'POST', url: '/api/v1/transfers/t1/execute' });
  });

  it('starts a transfer without waiting (?wait=false) and encodes ids and queries', async () => {
    const c = await client((_req, res) => json(res, 202, { data: { id: 't/1', status: 'in-progress' } }));
    await expect(c.transfers.start('t/1')).resolves.toEqual({ id: 't/1', status: 'in-progress' });
    await c.files.search({ q: 'a b&c', min_size: 0 });
    expect(server!.requests.map((r) => r.url)).toEqual(['/api/v1/transfers/t%2F1/execute?wait=false', '/api/v1/files/search?q=a+b%26c&min_size=0']);
  });
});

describe('paging', () => {
  const items = ['a', 'b', 'c', 'd', 'e'].map((id) => ({ id }));
  /** Pages of `limit` items keyed by the index of their first item. */
  const pages: Handler = (req, res) => {
    const url = new URL(req.url!, 'http://x');
    const start = Number(url.searchParams.get('cursor') ?? 0);
    const limit = Number(url.searchParams.get('limit'));
    const next = start + limit < items.length ? String(start + limit) : null;
    json(res, 200, { data: items.slice(start, start + limit), next_cursor: next });
  };

  it('answers one page with its next_cursor', async () => {
    const c = await client(pages);
    await expect(c.transfers.list({ limit: 2, status: 'queued' })).resolves.toEqual({ data: items.slice(0, 2), next_cursor: '2' });
    expect(server!.requests[0]!.url).toBe('/api/v1/transfers?limit=2&status=queued');
  });

  it('follows next_cursor across three pages until it is null, keeping the filters', async () => {
    const c = await client(pages);
    const all = await c.transfers.all({ limit: 2, status: 'failed' }).toArray();
    expect(all).toEqual(items);
    expect(server!.requests.map((r) => r.url)).toEqual([
      '/api/v1/transfers?limit=2&status=failed',
      '/api/v1/transfers?limit=2&status=failed&cursor=2',
      '/api/v1/transfers?limit=2&status=failed&cursor=4',
    ]);
  });

  it('fetches lazily: stopping early fetches no further page', async () => {
    const c = await client(pages);
    const seen: string[] = [];
    for await (const w of c.webhooks.all({ limit: 2 })) {
      seen.push(w.id);
      if (seen.length === 3) break;
    }
    expect(seen).toEqual(['a', 'b', 'c']);
    expect(server!.requests).toHaveLength(2);
  });
});

describe('upload', () => {
  it('streams multipart parts path and file, with a Content-Length when the size is known', async () => {
    let body: Buffer = Buffer.alloc(0);
    const c = await client(async (req, res) => {
      body = await readBody(req);
      json(res, 201, { data: { id: 'f1', name: 'r é.txt' } });
    });
    const content = Buffer.from('x'.repeat(100_000));
    await expect(c.files.upload({ name: 'r é.txt', path: '/in', size: content.length, content: [content.subarray(0, 5), content.subarray(5)] }))
      .resolves.toEqual({ id: 'f1', name: 'r é.txt' });
    const headers = server!.requests[0]!.headers;
    expect(Number(headers['content-length'])).toBe(body.length);
    const boundary = /boundary=(.+)$/.exec(headers['content-type']!)![1]!;
    expect(body.toString()).toBe(
      `--${boundary}\r\nContent-Disposition: form-data; name="path"\r\n\r\n/in\r\n` +
      `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="r é.txt"\r\n` +
      `Content-Type: application/octet-stream\r\n\r\n${content.toString()}\r\n--${boundary}--\r\n`,
    );
  });

  it('sends the first bytes before the source has produced the rest (nothing is buffered), chunked when the size is unknown', async () => {
    let firstBytes!: () => void;
    const serverHasBytes = new Promise<void>((r) => (firstBytes = r));
    let received = '';
    const c = await client(async (req, res) => {
      for await (const chunk of req) {
        received += String(chunk);
        if (received.includes('part-one')) firstBytes();
      }
      json(res, 201, { data: { id: 'f2' } });
    });
    async function* content() {
      yield Buffer.from('part-one');
      // Resumes only once the server has read the first chunk: a buffering client would hang here.
      await serverHasBytes;
      yield Buffer.from('part-two');
    }
    await expect(c.files.upload({ name: 'big.bin', content: content() })).resolves.toEqual({ id: 'f2' });
    expect(received).toContain('part-onepart-two');
    expect(server!.requests[0]!.headers['transfer-encoding']).toBe('chunked');
  });
});

describe('download', () => {
  const content = Buffer.from('0123456789abcdef');
  const sha = createHash('sha256').update(content).digest('hex');
  const send: Handler = (req, res) => {
    const range = /^bytes=(\d+)-(\d+)$/.exec(req.headers.range ?? '');
    const headers = {
      'content-type': 'text/plain', etag: `"${sha}"`,
      'content-disposition': `attachment; filename="_.txt"; filename*=UTF-8''%C3%A9.txt`,
    };
    if (!range) return void res.writeHead(200, { ...headers, 'content-length': content.length }).end(content);
    const [a, b] = [Number(range[1]), Number(range[2])];
    res.writeHead(206, { ...headers, 'content-length': b - a + 1, 'content-range': `bytes ${a}-${b}/${content.length}` }).end(content.subarray(a, b + 1));
  };

  it('streams the body with its headers', async () => {
    const c = await client(send);
    const d = await c.files.download('f1');
    expect(d).toMatchObject({ status: 200, size: 16, mimeType: 'text/plain', fileName: 'é.txt', etag: `"${sha}"` });
    expect(await text(d.body)).toBe(content.toString());
    expect(server!.requests[0]!.headers.authorization).toBe('Bearer svc_abc');
  });

  it('asks for a range and answers the 206 part', async () => {
    const c = await client(send);
    const d = await c.files.download('f1', { range: { start: 4, end: 7 } });
    expect(server!.requests[0]!.headers.range).toBe('bytes=4-7');
    expect(d).toMatchObject({ status: 206, size: 4, contentRange: 'bytes 4-7/16' });
    expect(await text(d.body)).toBe('4567');
  });

  it('downloads a share link by url, token or absolute URL, without the API key', async () => {
    const c = await client(send);
    await text((await c.shares.download('/api/v1/files/shared/tok_1')).body);
    await text((await c.shares.download('tok_2')).body);
    await text((await c.shares.download(`${server!.origin}/api/v1/files/shared/tok_3`)).body);
    expect(server!.requests.map((r) => r.url)).toEqual(['/api/v1/files/shared/tok_1', '/api/v1/files/shared/tok_2', '/api/v1/files/shared/tok_3']);
    expect(server!.requests.every((r) => r.headers.authorization === undefined)).toBe(true);
  });

  it('fails the body as a timeout when the server goes silent mid-download', async () => {
    const c = await client((_req, res) => {
      res.writeHead(200, { 'content-length': 100 });
      res.write('only some');
    }, 300);
    const d = await c.files.download('f1');
    await expect(text(d.body)).rejects.toMatchObject({ kind: 'timeout', message: expect.stringMatching(/timed out after 0\.3 s$/) });
  });
});
