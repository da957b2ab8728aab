import { createServer, type AddressInfo } from 'node:net';
import type { App } from '../src/app.js';
import { auth, buildTestApp, createAccount } from './helper.js';
import { counters, makeAgent, makeConnection, makeTransfer, SECRET, sha, transferAction } from './fixtures.js';
import { eventually, ProtocolClient } from './protocol-client.js';
import { eicar, testScanner, upload } from './files-helper.js';

/** Prometheus /metrics (plugins/app/metrics/): exposure, and the figures moving with real requests and a transfer. */
const TOKEN = `metrics-token-${'x'.repeat(24)}`;

/** The value of one sample (`name{labels} value`), or undefined when it is not in the text. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  const wanted = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  for (const line of text.split('\n')) {
    if (line.startsWith('#')) continue;
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!match || match[1] !== name) continue;
    const have = (match[2] ?? '').split(/,(?=[a-z_]+=")/).filter(Boolean);
    if (wanted.every((w) => have.includes(w))) return Number(match[3]);
  }
  return undefined;
}

describe('on the main port, behind XFER_METRICS_TOKEN', () => {
  let app: App;
  beforeAll(async () => {
    app = await buildTestApp({ metrics: { port: null, host: '127.0.0.1', token: TOKEN }, dispatchPollMs: 50, agentHeartbeatMs: 200 });
    await app.listen({ host: '127.0.0.1', port: 0 });
  });
  afterAll(() => app.close());

  const scrape = async () => {
    const res = await app.inject({ method: 'GET', url: '/metrics', headers: auth(TOKEN) });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/plain; version=0\.0\.4/);
    return res.body;
  };

  test('the token is required and compared: 401 without it or with another, 200 with it', async () => {
    const none = await app.inject({ method: 'GET', url: '/metrics' });
    expect(none.statusCode).toBe(401);
    expect(none.json()).toEqual({ error: 'A valid metrics token is required' });
    expect(none.headers['www-authenticate']).toBe('Bearer');
    expect((await app.inject({ method: 'GET', url: '/metrics', headers: auth(`${TOKEN}y`) })).statusCode).toBe(401);
    expect((await app.inject({ method: 'GET', url: '/metrics', headers: auth(TOKEN.slice(0, -1)) })).statusCode).toBe(401);
    // An API key is no metrics token.
    const account = await createAccount(app);
    expect((await app.inject({ method: 'GET', url: '/metrics', headers: auth(account.apiKey) })).statusCode).toBe(401);
    const text = await scrape();
    expect(text).toContain('# TYPE xfer_http_request_duration_seconds histogram');
    expect(text).toContain('process_cpu_user_seconds_total');
    expect(text).toContain('nodejs_eventloop_lag_seconds');
  });

  test('/metrics is no API route: absent from the OpenAPI document', async () => {
    const doc = (await app.inject({ method: 'GET', url: '/api/v1/openapi.json' })).json();
    expect(Object.keys(doc.paths).some((p) => p.includes('metrics'))).toBe(false);
  });

  test('the HTTP histogram moves after requests, labelled by route pattern, never by URL', async () => {
    const account = await createAccount(app);
    const before = await scrape();
    const labels = { method: 'GET', route: '/api/v1/transfers/:id', status: '404' };
    const count = (text: string) => sample(text, 'xfer_http_request_duration_seconds_count', labels) ?? 0;
    const id = '0123456789abcdef01234567';
    for (let i = 0; i < 3; i++) {
      expect((await app.inject({ method: 'GET', url: `/api/v1/transfers/${id}`, headers: auth(account.apiKey) })).statusCode).toBe(404);
    }
    const shareToken = `share-${'s'.repeat(30)}`;
    await app.inject({ method: 'GET', url: `/api/v1/files/shared/${shareToken}` });
    await app.inject({ method: 'GET', url: '/no/such/route-9f8e7d' });
    const after = await scrape();
    expect(count(after) - count(before)).toBe(3);
    expect(sample(after, 'xfer_http_request_duration_seconds_bucket', { ...labels, le: '+Inf' })).toBe(count(after));
    expect(sample(after, 'xfer_http_request_duration_seconds_count', { method: 'GET', route: '/api/v1/files/shared/:token' })).toBeGreaterThanOrEqual(1);
    expect(sample(after, 'xfer_http_request_duration_seconds_count', { method: 'GET', route: 'unmatched', status: '404' })).toBeGreaterThanOrEqual(1);
    for (const raw of [id, shareToken, 'route-9f8e7d', account.apiKey, TOKEN]) expect(after).not.toContain(raw);
  });

  test('agents, transfers, bytes and files move with a real transfer', async () => {
    const account = await createAccount(app);
    const key = account.apiKey;
    const before = await scrape();
    expect(sample(before, 'xfer_agents_connected')).toBe(0);
    expect(sample(before, 'xfer_transfers', { status: 'queued' })).toBe(0);

    const agent = await makeAgent(app, key);
    const { client } = await ProtocolClient.connect(app, agent.token);
    const src = await makeConnection(app, key, 'sftp');
    const dst = await makeConnection(app, key, 's3');
    const job = await makeTransfer(app, key, src.id, dst.id);
    await eventually(async () => sample(await scrape(), 'xfer_agents_connected') === 1, 'agent counted online');
    expect(sample(await scrape(), 'xfer_transfers', { status: 'queued' })).toBe(1);

    expect((await transferAction(app, key, job.id, 'execute', '?wait=false')).statusCode).toBe(202);
    await client.next('job.assign');
    client.send('job.accepted', { job_id: job.id });
    const running = await scrape();
    expect(sample(running, 'xfer_transfers', { status: 'in-progress' })).toBe(1);
    expect(sample(running, 'xfer_transfers', { status: 'queued' })).toBe(0);

    const files = Array.from({ length: 4 }, (_, i) => ({ path: `f-${i}.bin`, status: 'copied' as const, size: 250, sha256: sha(i), verified_by: 'sha256' }));
    client.send('job.progress', { job_id: job.id, ...counters(4, 4, 1000), listing_done: true, files });
    client.send('job.completed', { job_id: job.id, ...counters(4, 4, 1000) });
    const done = await eventually(async () => {
      const text = await scrape();
      return sample(text, 'xfer_transfers_finished_total', { status: 'completed' }) === 1 && text;
    }, 'completion counted');
    expect(sample(done, 'xfer_transfers', { status: 'in-progress' })).toBe(0);
    expect((sample(done, 'xfer_transfer_bytes_total') ?? 0) - (sample(before, 'xfer_transfer_bytes_total') ?? 0)).toBe(1000);
    expect((sample(done, 'xfer_transfer_files_total') ?? 0) - (sample(before, 'xfer_transfer_files_total') ?? 0)).toBe(4);

    client.close();
    await eventually(async () => sample(await scrape(), 'xfer_agents_connected') === 0, 'agent gone');
    // Credentials travelled to the agent; none of them, nor any token, is in the metrics.
    const last = await scrape();
    for (const secret of [SECRET, agent.token, key, TOKEN]) expect(last).not.toContain(secret);
  });
});

describe('on a separate port (XFER_METRICS_PORT)', () => {
  let app: App;
  beforeAll(async () => {
    app = await buildTestApp({ metrics: { port: 0, host: '127.0.0.1', token: null } });
  });
  afterAll(() => app.close());

  test('served there without a token, and not on the main port', async () => {
    const address = app.metricsAddress!;
    expect(address.address).toBe('127.0.0.1');
    const res = await fetch(`http://127.0.0.1:${address.port}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
    expect(await res.text()).toContain('xfer_transfers{status="queued"} 0');
    expect((await fetch(`http://127.0.0.1:${address.port}/other`)).status).toBe(404);
    expect((await app.inject({ method: 'GET', url: '/metrics' })).statusCode).toBe(404);
  });

  test('with a token set as well, the separate port requires it', async () => {
    const guarded = await buildTestApp({ metrics: { port: 0, host: '127.0.0.1', token: TOKEN } });
    try {
      const url = `http://127.0.0.1:${guarded.metricsAddress!.port}/metrics`;
      expect((await fetch(url)).status).toBe(401);
      expect((await fetch(url, { headers: auth('wrong-token-0000000000') })).status).toBe(401);
      expect((await fetch(url, { headers: auth(TOKEN) })).status).toBe(200);
      expect((await guarded.inject({ method: 'GET', url: '/metrics', headers: auth(TOKEN) })).statusCode).toBe(404);
    } finally {
      await guarded.close();
    }
  });
});

describe('scans and webhook attempts', () => {
  let app: App;
  beforeAll(async () => {
    app = await buildTestApp({
      scanner: testScanner(),
      metrics: { port: 0, host: '127.0.0.1', token: null },
      webhooks: { timeoutMs: 700, retryWindowMs: 3_000, backoffBaseMs: 50, backoffMaxMs: 3600_000, pollMs: 50, unsafeAllowedAddresses: ['127.0.0.1/32'] },
    });
  });
  afterAll(() => app.close());
  const scrape = async () => (await fetch(`http://127.0.0.1:${app.metricsAddress!.port}/metrics`)).text();

  test('each upload\'s scan is counted by verdict, with its latency', async () => {
    const account = await createAccount(app);
    expect((await upload(app, account.apiKey, 'clean.txt', 'nothing to see')).statusCode).toBe(201);
    expect((await upload(app, account.apiKey, 'eicar.com', eicar())).statusCode).toBe(422);
    const text = await scrape();
    expect(sample(text, 'xfer_scan_duration_seconds_count', { outcome: 'clean' })).toBe(1);
    expect(sample(text, 'xfer_scan_duration_seconds_count', { outcome: 'infected' })).toBe(1);
    expect(sample(text, 'xfer_scan_duration_seconds_sum', { outcome: 'clean' })).toBeGreaterThan(0);
  });

  test('a webhook attempt is counted by outcome', async () => {
    const account = await createAccount(app);
    // A port nobody listens on: the attempt fails, and a test send is never retried.
    const port = await new Promise<number>((resolve) => {
      const probe = createServer().listen(0, '127.0.0.1', () => {
        const { port: free } = probe.address() as AddressInfo;
        probe.close(() => resolve(free));
      });
    });
    const created = await app.inject({
      method: 'POST', url: '/api/v1/webhooks', headers: auth(account.apiKey),
      payload: { url: `https://127.0.0.1:${port}/hook`, events: ['file.uploaded'], secret: `whsec_test_${'k'.repeat(24)}` },
    });
    expect(created.statusCode).toBe(201);
    const sent = await app.inject({ method: 'POST', url: `/api/v1/webhooks/${created.json().data.id}/test`, headers: auth(account.apiKey) });
    expect(sent.json().data.success).toBe(false);
    const text = await scrape();
    expect(sample(text, 'xfer_webhook_deliveries_total', { outcome: 'failed' })).toBe(1);
    expect(text).not.toContain('whsec_test_');
  });
});

describe('neither configured', () => {
  test('/metrics answers 404', async () => {
    const app = await buildTestApp();
    try {
      expect(app.config.metrics).toEqual({ port: null, host: '127.0.0.1', token: null });
      expect((await app.inject({ method: 'GET', url: '/metrics' })).statusCode).toBe(404);
      expect(app.metricsAddress).toBeNull();
    } finally {
      await app.close();
    }
  });
});
