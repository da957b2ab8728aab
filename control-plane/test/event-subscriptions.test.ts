import { readFileSync } from 'node:fs';
import { WEBHOOK_EVENT_TYPES } from '@xfer/shared';
import type { App } from '../src/app.js';
import { EVENT_READ_SCOPES } from '../src/plugins/app/access/index.js';
import { OUTBOX_EVENT_TYPES } from '../src/plugins/app/webhooks/outbox.js';
import { auth, buildTestApp, createAccount, createKey, expectError, login, type TestAccount } from './helper.js';

/**
 * Subscribing to an event type needs the read scope of what the event carries (docs/security.md
 * "Event subscriptions"), for webhooks and notifications alike; sessions follow their role.
 */
let app: App;
let owner: TestAccount;

beforeAll(async () => {
  app = await buildTestApp();
  owner = await createAccount(app);
});
afterAll(() => app.close());

const call = (method: 'POST' | 'PUT', url: string, token: string, payload: Record<string, unknown>) =>
  app.inject({ method, url: `/api/v1${url}`, headers: auth(token), payload });
const hook = (events: string[]) => ({ url: 'https://8.8.8.8/hook', events });
const settings = (events: string[]) => ({ email: { enabled: false, recipients: ['ops@example.test'] }, events });

describe('the event → scope table', () => {
  /** `| \`type\` | \`scope\` |` rows of docs/security.md "Event subscriptions". */
  const documented = (): Map<string, string> => {
    const doc = readFileSync(new URL('../../docs/security.md', import.meta.url), 'utf8');
    const section = doc.slice(doc.indexOf('### Event subscriptions'));
    expect(section.length).toBeGreaterThan(0);
    const body = section.slice(0, section.indexOf('\n#', 1) > 0 ? section.indexOf('\n#', 1) : undefined);
    return new Map([...body.matchAll(/^\| `([a-z_]+\.[a-z_]+)` \| `([a-z-]+:read)` \|/gm)].map((m) => [m[1]!, m[2]!]));
  };

  test('every event type the server emits or accepts has a read scope, the scope of its kind, documented as in code', () => {
    const kinds: Record<string, string> = { file: 'files:read', transfer: 'transfers:read', data_room: 'data-rooms:read', user: 'users:read', workflow: 'workflows:read' };
    const docs = documented();
    const types = [...new Set<string>([...WEBHOOK_EVENT_TYPES, ...OUTBOX_EVENT_TYPES])];
    expect(types.length).toBeGreaterThanOrEqual(16);
    for (const type of types) {
      const scope = (EVENT_READ_SCOPES as Record<string, string>)[type];
      expect({ type, scope }).toEqual({ type, scope: expect.stringMatching(/:read$/) });
      const kind = type.slice(0, type.indexOf('.'));
      if (kinds[kind]) expect({ type, scope }).toEqual({ type, scope: kinds[kind] });
      expect({ type, documented: docs.get(type) }).toEqual({ type, documented: scope });
    }
    expect([...docs.keys()].sort()).toEqual([...types].sort());
  });
});

describe('webhooks', () => {
  test('webhooks:write alone subscribes to no event that carries data it cannot read: 403 naming the events and scopes, audited denied, nothing stored', async () => {
    const key = await createKey(app, owner.apiKey, ['webhooks:read', 'webhooks:write']);
    for (const [events, scope] of [
      [['user.login'], 'users:read'], [['user.registered'], 'users:read'], [['file.uploaded'], 'files:read'],
      [['data_room.member_added'], 'data-rooms:read'], [['transfer.failed'], 'transfers:read'], [['workflow.notify'], 'workflows:read'],
    ] as const) {
      expectError(await call('POST', '/webhooks', key, hook([...events])), 403,
        `Subscribing to ${events[0]} sends what it carries to the subscriber: this needs ${scope}, which the calling key does not hold`);
    }
    expect(await app.db.webhooks.countDocuments({ account_id: owner.accountId, url: 'https://8.8.8.8/hook', events: 'user.login' })).toBe(0);
    expect(await app.db.auditEvents.countDocuments({ action: 'webhook.create', outcome: 'denied', 'details.reason': 'scope escalation' })).toBeGreaterThanOrEqual(6);
  });

  test('with the read scopes it subscribes; a change keeps needing the scopes of every event the webhook carries', async () => {
    const key = await createKey(app, owner.apiKey, ['webhooks:write', 'files:read', 'transfers:read']);
    const res = await call('POST', '/webhooks', key, hook(['file.uploaded', 'transfer.completed']));
    expect(res.statusCode).toBe(201);
    const id = res.json().data.id as string;
    expect((await call('PUT', `/webhooks/${id}`, key, { url: 'https://8.8.4.4/other' })).statusCode).toBe(200);
    expectError(await call('PUT', `/webhooks/${id}`, key, { events: ['file.uploaded', 'user.login'] }), 403, /^Subscribing to user.login .*needs users:read/);
    expect((await app.db.webhooks.findById(id).lean())!.events).toEqual(['file.uploaded', 'transfer.completed']);
  });

  test('sessions follow their role: a member (no users:read) may not subscribe to user.*, an admin may', async () => {
    const email = (r: string) => `${r}-${Date.now()}-${Math.random().toString(16).slice(2)}@example.test`;
    const sessionOf = async (role: string) => {
      const e = email(role);
      const password = `pw-${Math.random().toString(16).slice(2)}xyz`;
      const r = await app.inject({ method: 'POST', url: '/api/v1/users', headers: auth(owner.apiKey), payload: { email: e, password, role } });
      expect(r.statusCode).toBe(201);
      return login(app, e, password);
    };
    const member = await sessionOf('member');
    expectError(await call('POST', '/webhooks', member, hook(['user.registered'])), 403,
      'Subscribing to user.registered sends what it carries to the subscriber: this needs users:read, which your role (member) does not hold');
    expect((await call('POST', '/webhooks', member, hook(['file.shared']))).statusCode).toBe(201);
    expect((await call('POST', '/webhooks', await sessionOf('admin'), hook(['user.registered']))).statusCode).toBe(201);
  });
});

describe('notifications', () => {
  test('the event list of the notification settings needs the read scope of each event; a member session follows its role', async () => {
    const key = await createKey(app, owner.apiKey, ['notifications:read', 'notifications:write', 'files:read']);
    expectError(await call('PUT', '/notifications/settings', key, settings(['file.uploaded', 'user.login', 'transfer.failed'])), 403,
      'Subscribing to user.login, transfer.failed sends what they carry to the subscriber: this needs transfers:read, users:read, which the calling key does not hold');
    expect(await app.db.auditEvents.countDocuments({ action: 'notifications.settings.update', outcome: 'denied' })).toBeGreaterThanOrEqual(1);
    const res = await call('PUT', '/notifications/settings', key, settings(['file.uploaded']));
    expect(res.statusCode).toBe(200);
    expect(res.json().data.events).toEqual(['file.uploaded']);
  });
});
