import { Readable } from 'node:stream';
import type { App } from '../src/app.js';
import { makeConnection, makeTransfer } from './fixtures.js';
import { auth, buildTestApp, createAccount, expectError, type TestAccount } from './helper.js';

let app: App;
let owner: TestAccount;

beforeAll(async () => {
  app = await buildTestApp({ bodyLimitBytes: 4096 });
  owner = await createAccount(app);
});
afterAll(() => app.close());

describe('bad input answers 4xx {error}, never 500', () => {
  test('malformed JSON body is 400', async () => {
    const res = await app.inject({
      method: 'POST', url: '/api/v1/api-keys', payload: '{"name": "x", scopes: [',
      headers: { ...auth(owner.apiKey), 'content-type': 'application/json' },
    });
    expectError(res, 400, 'Request body is not valid JSON');
  });

  test('an empty body where one is required is 400 naming the body, whatever its Content-Type', async () => {
    for (const type of ['application/json', 'text/plain', 'application/x-www-form-urlencoded', undefined]) {
      const res = await app.inject({ method: 'POST', url: '/api/v1/api-keys', payload: '', headers: { ...auth(owner.apiKey), ...(type ? { 'content-type': type } : {}) } });
      expectError(res, 400, 'body must be object');
    }
  });

  test('a route without a body accepts an empty body whatever its Content-Type (curl -X POST -H content-type:…)', async () => {
    const source = await makeConnection(app, owner.apiKey, 'sftp');
    const dest = await makeConnection(app, owner.apiKey, 's3');
    const job = await makeTransfer(app, owner.apiKey, source.id, dest.id);
    const noAgent = /^No online agent can serve connections/;
    for (const type of ['application/json', 'application/json; charset=utf-8', 'text/plain', 'application/x-www-form-urlencoded', 'application/octet-stream', undefined]) {
      const res = await app.inject({
        method: 'POST', url: `/api/v1/transfers/${job.id}/execute`, payload: '', headers: { ...auth(owner.apiKey), ...(type ? { 'content-type': type } : {}) },
      });
      // The route ran: it answers that no agent can run the job, not that the body is bad.
      expect({ type, status: res.statusCode }).toEqual({ type, status: 503 });
      expect(res.json<{ error: string }>().error).toMatch(noAgent);
    }
    // A chunked empty JSON body (no Content-Length) is read by the JSON parser: still no body.
    const chunked = await app.inject({
      method: 'POST', url: `/api/v1/transfers/${job.id}/execute`, payload: Readable.from([]),
      headers: { ...auth(owner.apiKey), 'content-type': 'application/json', 'transfer-encoding': 'chunked' },
    });
    expect(chunked.statusCode).toBe(503);
    // A body that is there is still read and checked.
    const bad = await app.inject({
      method: 'POST', url: `/api/v1/transfers/${job.id}/execute`, payload: '{"x": ', headers: { ...auth(owner.apiKey), 'content-type': 'application/json' },
    });
    expectError(bad, 400, 'Request body is not valid JSON');
    const text = await app.inject({
      method: 'POST', url: `/api/v1/transfers/${job.id}/execute`, payload: 'hello', headers: { ...auth(owner.apiKey), 'content-type': 'text/plain' },
    });
    expectError(text, 415);
  });

  test('an empty multipart upload is still refused as not being an upload', async () => {
    const res = await app.inject({ method: 'POST', url: '/api/v1/files/upload', payload: '', headers: { ...auth(owner.apiKey), 'content-type': 'multipart/form-data; boundary=x' } });
    expect(res.statusCode).toBeGreaterThanOrEqual(400);
    expect(res.statusCode).toBeLessThan(500);
    expect(res.json<{ error: string }>().error).toBeTruthy();
  });

  test('wrong type names the field', async () => {
    const res = await app.inject({ method: 'POST', url: '/api/v1/api-keys', headers: auth(owner.apiKey), payload: { name: 5, scopes: ['files:read'] } });
    expectError(res, 400, 'body.name must be string');
  });

  test('a number is not coerced from a string in a body', async () => {
    const res = await app.inject({ method: 'POST', url: '/api/v1/api-keys', headers: auth(owner.apiKey), payload: { name: 'k', scopes: ['files:read'], expires_in_days: '5' } });
    expectError(res, 400, 'body.expires_in_days must be integer');
  });

  test('unknown field is 400 and named', async () => {
    const res = await app.inject({ method: 'POST', url: '/api/v1/api-keys', headers: auth(owner.apiKey), payload: { name: 'k', scopes: ['files:read'], admin: true } });
    expectError(res, 400, "body has unknown field 'admin'");
  });

  test('missing field is 400 and named', async () => {
    const res = await app.inject({ method: 'POST', url: '/api/v1/api-keys', headers: auth(owner.apiKey), payload: { scopes: ['files:read'] } });
    expectError(res, 400, 'body.name is required');
  });

  test('empty or blank name is 400', async () => {
    for (const name of ['', '   ']) {
      const res = await app.inject({ method: 'POST', url: '/api/v1/api-keys', headers: auth(owner.apiKey), payload: { name, scopes: ['files:read'] } });
      expectError(res, 400, /body\.name/);
    }
  });

  test('oversized body is 413', async () => {
    const res = await app.inject({ method: 'POST', url: '/api/v1/api-keys', headers: auth(owner.apiKey), payload: { name: 'x'.repeat(5000), scopes: ['files:read'] } });
    expectError(res, 413, /larger than 4096 bytes/);
  });

  test('unsupported content type is 415', async () => {
    const res = await app.inject({ method: 'POST', url: '/api/v1/api-keys', headers: { ...auth(owner.apiKey), 'content-type': 'text/plain' }, payload: 'hello' });
    expectError(res, 415);
  });

  test('invalid and unknown ids are 404', async () => {
    for (const id of ['nope', '0123456789abcdef01234567', '../../etc']) {
      const res = await app.inject({ method: 'DELETE', url: `/api/v1/api-keys/${encodeURIComponent(id)}`, headers: auth(owner.apiKey) });
      expectError(res, 404);
    }
  });

  test('bad query values are 400', async () => {
    for (const q of ['limit=0', 'limit=1001', 'limit=abc', 'cursor=zzz']) {
      const res = await app.inject({ method: 'GET', url: `/api/v1/api-keys?${q}`, headers: auth(owner.apiKey) });
      expectError(res, 400);
    }
  });

  test('a path segment too long is 414 {error}, bad percent-encoding 400 {error}; neither echoes the URL', async () => {
    const long = await app.inject({ method: 'GET', url: `/api/v1/files/shared/${'t'.repeat(150)}` });
    expectError(long, 414, 'A path segment of the URL is too long');
    const bad = await app.inject({ method: 'GET', url: '/api/v1/files/shared/secret%zz' });
    expectError(bad, 400, 'The URL is not valid (bad percent-encoding)');
    expect(bad.headers['x-request-id']).toBeTruthy();
  });

  test('unknown route is 404 {error}', async () => {
    const res = await app.inject({ method: 'GET', url: '/api/v1/nothing-here', headers: auth(owner.apiKey) });
    expectError(res, 404, 'No route for GET /api/v1/nothing-here');
  });
});

describe('request ids', () => {
  test('every response carries X-Request-Id, generated or echoed', async () => {
    const generated = await app.inject({ method: 'GET', url: '/api/v1/health' });
    expect(generated.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
    const echoed = await app.inject({ method: 'GET', url: '/api/v1/nothing', headers: { 'x-request-id': 'trace-123' } });
    expect(echoed.headers['x-request-id']).toBe('trace-123');
    const unsafe = await app.inject({ method: 'GET', url: '/api/v1/health', headers: { 'x-request-id': 'bad id\nwith newline' } });
    expect(unsafe.headers['x-request-id']).not.toContain('bad id');
  });
});

describe('health', () => {
  test('answers {status: ok} without authentication', async () => {
    const res = await app.inject({ method: 'GET', url: '/api/v1/health' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ status: 'ok' });
  });
});
