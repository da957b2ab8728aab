import { Types } from 'mongoose';
import type { App } from '../src/app.js';
import { Messages, SCOPES } from '@xfer/shared';
import { auth, buildTestApp, createAccount, createKey, expectError, type TestAccount } from './helper.js';

/**
 * Walks every registered API route. New routes are covered automatically: a route with an
 * `:id` and no fixture below fails the test until one is added.
 */
let app: App;
let owner: TestAccount;
let stranger: TestAccount;

beforeAll(async () => {
  app = await buildTestApp();
  owner = await createAccount(app, 'enterprise');
  stranger = await createAccount(app, 'enterprise');
});
afterAll(() => app.close());

// The agents' WebSocket authenticates the agent token itself (routes/agents/connect.ts).
// A share link's token is its own credential (routes/shares).
const PUBLIC_ROUTES = [
  'GET /api/v1/health', 'POST /api/v1/auth/login', 'GET /api/v1/agents/connect', 'GET /api/v1/files/shared/:token',
  // The OpenAPI document and @fastify/swagger-ui's pages (plugins/app/openapi.ts).
  'GET /api/v1/openapi.json', 'GET /api/v1/docs', 'GET /api/v1/docs/static/index.html', 'GET /api/v1/docs/static/swagger-initializer.js',
  'GET /api/v1/docs/json', 'GET /api/v1/docs/yaml', 'GET /api/v1/docs/static/*',
  // A data-room invite token is its own credential (routes/rooms).
  'GET /api/v1/rooms/:token', 'GET /api/v1/rooms/:token/files/:file_id/download', 'POST /api/v1/rooms/:token/upload',
];

const fill = (url: string, id: string) => url.replace(/:[A-Za-z_]+/g, id);

/** Two connections of `owner` (sftp and nfs): a transfer's or a schedule's ends. */
async function ownerConnections(): Promise<[string, string]> {
  const connection = async (type: string, extra: Record<string, unknown>) => (await app.inject({
    method: 'POST', url: '/api/v1/connections', headers: auth(owner.apiKey), payload: { name: `c-${new Types.ObjectId()}`, type, ...extra },
  })).json().data.id as string;
  return [await connection('sftp', { host: 'example.test', credentials: { username: 'u', password: 'p' } }), await connection('nfs', { host: 'example.test' })];
}

/** Creates a resource of `owner` for routes under a path prefix, and a body that passes validation. */
const FIXTURES: Record<string, { create: () => Promise<string>; body?: Record<string, unknown> }> = {
  '/api/v1/api-keys/': {
    create: async () => {
      const res = await app.inject({ method: 'POST', url: '/api/v1/api-keys', headers: auth(owner.apiKey), payload: { name: 'k', scopes: ['files:read'] } });
      return res.json().data.id;
    },
  },
  '/api/v1/connections/': {
    create: async () => {
      const res = await app.inject({
        method: 'POST', url: '/api/v1/connections', headers: auth(owner.apiKey),
        payload: { name: `c-${new Types.ObjectId()}`, type: 'sftp', host: 'example.test', credentials: { username: 'u', password: 'p' } },
      });
      return res.json().data.id;
    },
    body: { name: 'renamed' },
  },
  '/api/v1/agents/': {
    create: async () => {
      const res = await app.inject({ method: 'POST', url: '/api/v1/agents', headers: auth(owner.apiKey), payload: { name: `a-${new Types.ObjectId()}` } });
      return res.json().data.id;
    },
    body: { max_jobs: 1 },
  },
  '/api/v1/transfers/': {
    create: async () => {
      const [src, dst] = await ownerConnections();
      const res = await app.inject({
        method: 'POST', url: '/api/v1/transfers', headers: auth(owner.apiKey),
        payload: { name: 'j', sourceConnectionId: src, sourcePath: '/a', destinationConnectionId: dst, destinationPath: '/b' },
      });
      return res.json().data.id;
    },
  },
  '/api/v1/parameters/': {
    create: async () => {
      const res = await app.inject({
        method: 'POST', url: '/api/v1/parameters', headers: auth(owner.apiKey), payload: { name: `p_${new Types.ObjectId()}`, value: 'v', secret: true },
      });
      return res.json().data.id;
    },
    body: { value: 'changed' },
  },
  '/api/v1/schedules/': {
    create: async () => {
      const [src, dst] = await ownerConnections();
      const res = await app.inject({
        method: 'POST', url: '/api/v1/schedules', headers: auth(owner.apiKey),
        payload: { name: 's', cron: '0 2 * * *', active: false, transfer: { sourceConnectionId: src, sourcePath: '/a', destinationConnectionId: dst, destinationPath: '/b' } },
      });
      return res.json().data.id;
    },
    body: { name: 'renamed' },
  },
  '/api/v1/watchers/': {
    create: async () => {
      const [src, dst] = await ownerConnections();
      const res = await app.inject({
        method: 'POST', url: '/api/v1/watchers', headers: auth(owner.apiKey),
        payload: { name: 'w', connectionId: src, path: '/in', active: false, action: { transfer: { destinationConnectionId: dst, destinationPath: '/b' } } },
      });
      return res.json().data.id;
    },
    body: { name: 'renamed' },
  },
  '/api/v1/workflows/': {
    create: async () => {
      const res = await app.inject({
        method: 'POST', url: '/api/v1/workflows', headers: auth(owner.apiKey),
        payload: { name: 'wf', steps: [{ type: 'notify', channel: 'webhook_event' }] },
      });
      return res.json().data.id;
    },
    body: { name: 'renamed' },
  },
  // A finished run of a notify-only workflow: its id is another account's on /workflow-runs/:id.
  '/api/v1/workflow-runs/': {
    create: async () => {
      const wf = await app.inject({
        method: 'POST', url: '/api/v1/workflows', headers: auth(owner.apiKey), payload: { name: 'wf', steps: [{ type: 'notify', channel: 'webhook_event' }] },
      });
      const run = await app.inject({ method: 'POST', url: `/api/v1/workflows/${wf.json().data.id}/run`, headers: auth(owner.apiKey), payload: {} });
      return run.json().data.id;
    },
    body: {},
  },
  // A file record is enough to own an id (uploading needs clamd, which this test does not use).
  '/api/v1/files/': {
    create: async () => String((await app.db.files.create({
      account_id: new Types.ObjectId(owner.accountId), name: 'a.txt', name_lower: 'a.txt', path: '/', size: 1,
      mime_type: 'text/plain', sha256: '0'.repeat(64), storage_key: 'none', uploaded_by: { type: 'user', id: owner.userId },
    }))._id),
    body: {},
  },
  '/api/v1/webhooks/': {
    create: async () => (await app.inject({
      method: 'POST', url: '/api/v1/webhooks', headers: auth(owner.apiKey), payload: { url: 'https://8.8.8.8/hook', events: ['file.uploaded'] },
    })).json().data.id,
    body: { active: false },
  },
  '/api/v1/data-rooms/': {
    create: async () => (await app.inject({ method: 'POST', url: '/api/v1/data-rooms', headers: auth(owner.apiKey), payload: { name: 'room' } })).json().data.id,
    body: { name: 'renamed' },
  },
  '/api/v1/users/': {
    create: async () => {
      const res = await app.inject({
        method: 'POST', url: '/api/v1/users', headers: auth(owner.apiKey),
        payload: { email: `u-${new Types.ObjectId()}@example.test`, role: 'member', password: 'a-long-password-1' },
      });
      return res.json().data.id;
    },
    body: { name: 'renamed' },
  },
};

describe('every API route declares its access', () => {
  test('the public routes are exactly the expected ones', () => {
    const publicRoutes = app.apiRoutes.filter((r) => r.access.public).map((r) => `${r.method} ${r.url}`);
    expect(publicRoutes.sort()).toEqual([...PUBLIC_ROUTES].sort());
  });

  test('a key lacking the route scope gets 403 "API key missing required scope"', async () => {
    const scoped = app.apiRoutes.filter((r) => r.access.scope);
    expect(scoped.length).toBeGreaterThan(5);
    const keys = new Map<string, string>();
    for (const route of scoped) {
      const scope = route.access.scope!;
      if (!keys.has(scope)) keys.set(scope, await createKey(app, owner.apiKey, SCOPES.filter((s) => s !== scope)));
      const res = await app.inject({ method: route.method as 'GET', url: fill(route.url, String(new Types.ObjectId())), headers: auth(keys.get(scope)!), payload: route.method === 'GET' || route.method === 'DELETE' ? undefined : {} });
      try {
        expectError(res, 403, Messages.missingScope);
      } catch (err) {
        throw new Error(`${route.method} ${route.url} (${scope}): ${res.statusCode} ${res.body}`, { cause: err });
      }
    }
  });

  test('console-only routes refuse every API key', async () => {
    const consoleOnly = app.apiRoutes.filter((r) => r.access.consoleOnly);
    for (const route of consoleOnly) {
      const res = await app.inject({ method: route.method as 'GET', url: fill(route.url, 'x'), headers: auth(owner.apiKey), payload: route.method === 'GET' || route.method === 'DELETE' ? undefined : {} });
      expectError(res, 403, Messages.consoleOnly);
    }
  });

  test("another account's ids are 404 on every route that takes one", async () => {
    const withId = app.apiRoutes.filter((r) => r.url.includes(':') && !r.access.public && !r.access.consoleOnly);
    const ids = new Map<string, string>();
    for (const route of withId) {
      const prefix = Object.keys(FIXTURES).find((p) => route.url.startsWith(p));
      if (!prefix) throw new Error(`No cross-account fixture for ${route.method} ${route.url}: add one to FIXTURES`);
      const fixture = FIXTURES[prefix]!;
      if (!ids.has(prefix)) ids.set(prefix, await fixture.create());
      const res = await app.inject({
        method: route.method as 'GET', url: fill(route.url, ids.get(prefix)!), headers: auth(stranger.apiKey),
        payload: route.method === 'PUT' ? fixture.body : route.method === 'POST' ? {} : undefined,
      });
      try {
        expectError(res, 404);
      } catch (err) {
        throw new Error(`${route.method} ${route.url}: ${res.statusCode} ${res.body}`, { cause: err });
      }
    }
  });
});
