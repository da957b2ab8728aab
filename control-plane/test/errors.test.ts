import type { App } from '../src/app.js';
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

  test('empty JSON body is 400', async () => {
    const res = await app.inject({ method: 'POST', url: '/api/v1/api-keys', payload: '', headers: { ...auth(owner.apiKey), 'content-type': 'application/json' } });
    expectError(res, 400);
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
