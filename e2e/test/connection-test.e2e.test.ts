import { randomBytes } from 'node:crypto';
import type { ConnectionType } from '@xfer/shared';
import { startStack, type Stack } from '../src/stack.js';
import { AGENT_ENV, FIXTURES, MESSAGES, closedPort, type ConnectionBody } from './support/connections.js';

/**
 * `POST /connections/:id/test` through a running agent, for every connection type with a test
 * server: a working connection succeeds, and each usual mistake (wrong host, wrong port, wrong
 * credentials, missing base path) fails with a message that says which.
 */
const run = randomBytes(4).toString('hex');
const types = Object.keys(FIXTURES) as ConnectionType[];
let stack: Stack;
let port: number;

beforeAll(async () => {
  port = await closedPort();
  stack = await startStack({ env: process.env });
  await stack.startAgent('connection-test-agent', AGENT_ENV);
}, 120_000);

afterAll(async () => {
  await stack?.stop();
}, 60_000);

async function testConnection(body: ConnectionBody): Promise<{ success: boolean; message: string }> {
  const { id } = await stack.api.data('POST', '/connections', { name: `test ${body.type} ${randomBytes(3).toString('hex')}`, ...body });
  const res = await stack.api.call('POST', `/connections/${id}/test`);
  expect(res.status).toBe(200);
  return res.body.data;
}

describe.each(types)('%s', (type) => {
  const fixture = FIXTURES[type]!;
  const place = `conn-test-${run}-${type}`;
  let good: ConnectionBody;

  beforeAll(async () => {
    await fixture.prepare(place);
    good = fixture.body(place);
  }, 60_000);

  test('a working connection', async () => {
    const result = await testConnection(good);
    expect([result.success, result.message]).toEqual([true, expect.any(String)]);
  }, 60_000);

  test.each([
    ['wrong host', () => fixture.wrongHost(good), MESSAGES.host],
    ['wrong port', () => fixture.wrongPort(good, port), MESSAGES.port],
    ['wrong credentials', () => fixture.wrongCredentials(good), fixture.credentialsMessage],
    ['missing base path', () => ({ ...good, path: `${good.path}-missing` }), MESSAGES.path],
  ] as const)('%s', async (_name, broken, message) => {
    const result = await testConnection(broken());
    expect(result.success).toBe(false);
    expect(result.message).toMatch(message);
  }, 60_000);
});
