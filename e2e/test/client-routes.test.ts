import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { XferClient } from '@xfer/shared';
import { controlPlaneRoutes } from './support/control-plane-routes.js';

/**
 * Every route of the control plane has a client method: the routes are read from the control
 * plane's OpenAPI document (support/control-plane-routes.ts), the client's calls are recorded by
 * a real server, and the two sets must match. A route added without a method fails here.
 */

/** One call of every method, with placeholder ids the recorder turns back into parameters. */
const CALLS: Array<(c: XferClient) => Promise<unknown>> = [
  (c) => c.health(),
  (c) => c.auth.login({ email: 'a@b.c', password: 'p' }),
  (c) => c.apiKeys.list(), (c) => c.apiKeys.create({ name: 'k', scopes: ['files:read'] }), (c) => c.apiKeys.revoke('ID'),
  (c) => c.users.list(), (c) => c.users.create({ email: 'a@b.c', role: 'member', password: 'p'.repeat(12) }),
  (c) => c.users.get('ID'), (c) => c.users.update('ID', { name: 'n' }), (c) => c.users.delete('ID'),
  (c) => c.settings.getMfa(), (c) => c.settings.updateMfa({ enabled: true }), (c) => c.settings.verifyMfa({ code: '123456' }),
  (c) => c.settings.getSessions(), (c) => c.settings.revokeSessions(), (c) => c.settings.loginEvents(),
  (c) => c.settings.getAvatar(), (c) => c.settings.updateAvatar({ url: null }),
  (c) => c.settings.getRetention(), (c) => c.settings.updateRetention({ audit_days: 90 }),
  (c) => c.settings.getServicePrincipals(), (c) => c.settings.updateServicePrincipals({ service_principals: [] }),
  (c) => c.settings.testStatus(),
  (c) => c.settings.getPlan(), (c) => c.settings.updatePlan({ plan: 'team' }),
  (c) => c.activity.list(), (c) => c.activity.summary(),
  (c) => c.connections.list(), (c) => c.connections.create({ name: 'n', type: 'nfs', host: 'h' }), (c) => c.connections.get('ID'),
  (c) => c.connections.update('ID', { port: 1 }), (c) => c.connections.delete('ID'), (c) => c.connections.test('ID'),
  (c) => c.agents.list(), (c) => c.agents.create({ name: 'a' }), (c) => c.agents.get('ID'), (c) => c.agents.update('ID', { max_jobs: 2 }), (c) => c.agents.delete('ID'), (c) => c.agents.test('ID'), (c) => c.agents.approve('ID'),
  (c) => c.transfers.list(), (c) => c.transfers.get('ID'), (c) => c.transfers.execute('ID'), (c) => c.transfers.cancel('ID'),
  (c) => c.transfers.retry('ID'), (c) => c.transfers.delete('ID'), (c) => c.transfers.files('ID'),
  (c) => c.transfers.plan('ID'), (c) => c.transfers.getPlan('ID'), (c) => c.transfers.planItems('ID'), (c) => c.transfers.startPlan('ID', 'PLAN'),
  (c) => c.transfers.create({ name: 't', sourceConnectionId: 's', sourcePath: '/', destinationConnectionId: 'd', destinationPath: '/' }),
  (c) => c.files.list(), (c) => c.files.search({ q: 'x' }), (c) => c.files.get('ID'), (c) => c.files.delete('ID'),
  async (c) => (await c.files.download('ID')).body.resume(),
  (c) => c.files.upload({ name: 'a', content: [Buffer.from('a')] }),
  (c) => c.shares.create('ID'), (c) => c.shares.listForFile('ID'), (c) => c.shares.list(), (c) => c.shares.revoke('ID', 'SHARE'),
  async (c) => (await c.shares.download('TOKEN')).body.resume(),
  (c) => c.webhooks.list(), (c) => c.webhooks.create({ url: 'https://h', events: ['file.uploaded'] }), (c) => c.webhooks.get('ID'),
  (c) => c.webhooks.update('ID', { active: false }), (c) => c.webhooks.delete('ID'), (c) => c.webhooks.test('ID'), (c) => c.webhooks.deliveries('ID'),
  (c) => c.parameters.list(), (c) => c.parameters.create({ name: 'n', value: 'v' }), (c) => c.parameters.get('ID'),
  (c) => c.parameters.update('ID', { value: 'w' }), (c) => c.parameters.delete('ID'),
  (c) => c.schedules.list(), (c) => c.schedules.get('ID'), (c) => c.schedules.update('ID', { active: false }), (c) => c.schedules.delete('ID'),
  (c) => c.schedules.create({ name: 's', cron: '0 2 * * *', transfer: { sourceConnectionId: 's', sourcePath: '/', destinationConnectionId: 'd', destinationPath: '/' } }),
  (c) => c.schedules.run('ID'), (c) => c.schedules.runs('ID'),
  (c) => c.watchers.list(), (c) => c.watchers.get('ID'), (c) => c.watchers.update('ID', { active: false }), (c) => c.watchers.delete('ID'),
  (c) => c.watchers.create({ name: 'w', connectionId: 's', path: '/in', action: { transfer: { destinationConnectionId: 'd', destinationPath: '/' } } }),
  (c) => c.watchers.events('ID'),
  (c) => c.workflows.list(), (c) => c.workflows.get('ID'), (c) => c.workflows.update('ID', { name: 'x' }), (c) => c.workflows.delete('ID'),
  (c) => c.workflows.create({ name: 'w', steps: [{ type: 'notify', channel: 'webhook_event' }] }),
  (c) => c.workflows.run('ID', { params: { a: 'b' } }), (c) => c.workflows.runs('ID'), (c) => c.workflows.getRun('ID'), (c) => c.workflows.cancelRun('ID'),
  (c) => c.dataRooms.list(), (c) => c.dataRooms.create({ name: 'r' }), (c) => c.dataRooms.get('ID'), (c) => c.dataRooms.update('ID', { name: 'x' }),
  (c) => c.dataRooms.delete('ID'), (c) => c.dataRooms.files('ID'), (c) => c.dataRooms.addFile('ID', 'f'),
  (c) => c.dataRooms.upload('ID', { name: 'a', content: [Buffer.from('a')] }), (c) => c.dataRooms.removeFile('ID', 'FILE'),
  (c) => c.dataRooms.members('ID'), (c) => c.dataRooms.addMember('ID', { email: 'a@b.c', role: 'viewer' }), (c) => c.dataRooms.removeMember('ID', 'MEMBER'),
  (c) => c.dataRooms.view('TOKEN'), async (c) => (await c.dataRooms.download('TOKEN', 'FILE')).body.resume(),
  (c) => c.dataRooms.contribute('TOKEN', { name: 'a', content: [Buffer.from('a')] }),
  (c) => c.notifications.settings(), (c) => c.notifications.test(), (c) => c.notifications.log(),
  (c) => c.notifications.updateSettings({ email: { enabled: false }, events: [] }),
];

/** Every request the recorder saw, as method and URL. */
const requests: Array<{ method: string; url: string }> = [];
let server: Server | undefined;
afterAll(() => new Promise<void>((resolve) => {
  server?.closeAllConnections();
  if (server) server.close(() => resolve());
  else resolve();
}));

/** A loopback server that records each request and answers every one with a body any method accepts. */
async function recorder(): Promise<string> {
  server = createServer((req, res) => {
    requests.push({ method: req.method ?? '', url: req.url ?? '' });
    req.resume();
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ data: [], next_cursor: null, success: true, status: 'ok' }));
  });
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/api/v1`;
}

test('the client has a method for every route of the control plane', async () => {
  const client = new XferClient({ baseUrl: await recorder(), token: 'svc_x' });
  for (const call of CALLS) await call(client);
  const called = requests.map((r) => `${r.method} ${new URL(r.url, 'http://x').pathname
    .replace(/^\/api\/v1/, '').replace(/\/ID(?=\/|$)/g, '/:id').replace('/SHARE', '/:share_id').replace('/TOKEN', '/:token')
    .replace('/FILE', '/:file_id').replace('/MEMBER', '/:member_id')}`);
  const routes = await controlPlaneRoutes();
  expect(routes.length).toBeGreaterThan(50);
  expect([...new Set(called)].sort()).toEqual(routes);
});
