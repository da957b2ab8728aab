import { Validator } from '@seriousme/openapi-schema-validator';
import { buildTestApp, createAccount, type TestAccount } from './helper.js';
import type { App } from '../src/app.js';
import { DOCS_PREFIX, OPENAPI_URL } from '../src/plugins/app/openapi.js';

/**
 * GET /api/v1/openapi.json is generated from the route schemas (@fastify/swagger) and GET
 * /api/v1/docs renders it (@fastify/swagger-ui): both public, both from the running app.
 */
interface Operation {
  security?: Array<Record<string, string[]>>;
  responses: Record<string, { content?: Record<string, { schema: Record<string, unknown> }> }>;
  parameters?: Array<{ in: string; name: string }>;
  requestBody?: unknown;
}
interface Document {
  openapi: string;
  paths: Record<string, Record<string, Operation>>;
  components: { securitySchemes: Record<string, { type: string; scheme: string }> };
}

let app: App;
let owner: TestAccount;
let document: Document;

beforeAll(async () => {
  app = await buildTestApp();
  owner = await createAccount(app);
  const res = await app.inject({ method: 'GET', url: OPENAPI_URL });
  expect(res.statusCode).toBe(200);
  expect(res.headers['content-type']).toMatch(/^application\/json/);
  document = res.json();
});
afterAll(() => app?.close());

const operation = (method: string, url: string): Operation | undefined =>
  document.paths[url.replace(/:([A-Za-z_]+)/g, '{$1}')]?.[method.toLowerCase()];

test('the document is valid OpenAPI 3.1', async () => {
  expect(document.openapi).toBe('3.1.0');
  const result = await new Validator().validate(document as unknown as Record<string, unknown>);
  expect(result.errors).toBeUndefined();
  expect(result.valid).toBe(true);
});

test('it lists every API route but the pages of the docs, with its path parameters', () => {
  const routes = app.apiRoutes.filter((r) => !r.url.startsWith(DOCS_PREFIX));
  expect(routes.length).toBeGreaterThan(50);
  const missing = routes.filter((r) => !operation(r.method, r.url)).map((r) => `${r.method} ${r.url}`);
  expect(missing).toEqual([]);
  const documented = Object.values(document.paths).reduce((n, ops) => n + Object.keys(ops).length, 0);
  expect(documented).toBe(routes.length);
  for (const route of routes) {
    const params = [...route.url.matchAll(/:([A-Za-z_]+)/g)].map((m) => m[1]).sort();
    const declared = (operation(route.method, route.url)!.parameters ?? []).filter((p) => p.in === 'path').map((p) => p.name).sort();
    expect({ route: route.url, params: declared }).toEqual({ route: route.url, params });
  }
});

test('security follows config.access: bearer on every route but the public ones', () => {
  expect(document.components.securitySchemes.bearer).toMatchObject({ type: 'http', scheme: 'bearer' });
  for (const route of app.apiRoutes.filter((r) => !r.url.startsWith(DOCS_PREFIX))) {
    const expected = route.access.public ? [] : [{ bearer: [] }];
    expect({ route: `${route.method} ${route.url}`, security: operation(route.method, route.url)!.security })
      .toEqual({ route: `${route.method} ${route.url}`, security: expected });
  }
});

test('every error status is documented as exactly {error}; declared success schemas are shown', () => {
  for (const [path, ops] of Object.entries(document.paths)) {
    for (const [method, op] of Object.entries(ops)) {
      for (const status of ['4XX', '5XX']) {
        expect({ op: `${method} ${path} ${status}`, schema: op.responses[status]?.content?.['application/json']?.schema }).toMatchObject({
          schema: { type: 'object', required: ['error'], properties: { error: { type: 'string' } }, additionalProperties: false },
        });
      }
      expect(Object.keys(op.responses).some((s) => s.startsWith('2'))).toBe(true);
    }
  }
  expect(operation('POST', '/api/v1/api-keys')!.responses['201']!.content!['application/json']!.schema).toMatchObject({
    type: 'object', required: ['data', 'warning'],
  });
  expect(operation('GET', '/api/v1/health')!.responses['503']).toBeDefined();
  expect(operation('POST', '/api/v1/transfers')!.requestBody).toMatchObject({ required: true });
  // config.optionalBody: the route takes a POST without a body.
  expect(operation('POST', '/api/v1/files/:id/share')!.requestBody).toMatchObject({ required: false });
});

test('the document and the docs are public; the docs page is HTML with its own assets (no CDN)', async () => {
  const page = await app.inject({ method: 'GET', url: DOCS_PREFIX });
  expect(page.statusCode).toBe(200);
  expect(page.headers['content-type']).toMatch(/^text\/html/);
  expect(page.body).toContain('swagger-ui');
  const assets = [...page.body.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!);
  expect(assets.length).toBeGreaterThan(2);
  expect(assets.filter((a) => /^(https?:)?\/\//.test(a))).toEqual([]);
  for (const asset of assets) {
    const url = new URL(asset, `http://x${DOCS_PREFIX}`).pathname;
    const res = await app.inject({ method: 'GET', url });
    expect({ url, status: res.statusCode }).toEqual({ url, status: 200 });
  }
  const initializer = await app.inject({ method: 'GET', url: `${DOCS_PREFIX}/static/swagger-initializer.js` });
  expect(initializer.statusCode).toBe(200);
  const json = await app.inject({ method: 'GET', url: `${DOCS_PREFIX}/json` });
  expect(json.json()).toEqual(document);
});

test('an API key changes nothing: the same document with or without one', async () => {
  const res = await app.inject({ method: 'GET', url: OPENAPI_URL, headers: { authorization: `Bearer ${owner.apiKey}` } });
  expect(res.json()).toEqual(document);
});
