import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startStack, type Stack } from '../src/stack.js';

/**
 * What an agent's owner allows, with the real binaries: `xfer-agent start --allow-roots DIR
 * --deny-hosts …`. The reproduction of issue 12 (an nfs connection with `mount_path: "/"` copied
 * /etc/hostname of the agent's host) now ends in a failed job naming the directory and the
 * setting, and a denied host fails its connection test with a message saying which setting.
 */
const env = process.env;
let stack: Stack;
let agentId: string;
let data: string;

beforeAll(async () => {
  data = mkdtempSync(join(tmpdir(), 'xfer-e2e-access-'));
  stack = await startStack({ env });
  const agent = await stack.startAgent(`access-${randomBytes(3).toString('hex')}`, {}, ['--allow-roots', data, '--deny-hosts', '127.0.0.0/8,::1']);
  agentId = agent.id;
}, 120_000);

afterAll(async () => {
  await stack?.stop();
  rmSync(data, { recursive: true, force: true });
}, 60_000);

async function connection(body: Record<string, unknown>): Promise<string> {
  const created = await stack.api.data<{ id: string }>('POST', '/connections', { name: `access ${randomBytes(3).toString('hex')}`, agent_id: agentId, ...body });
  return created.id;
}

test('mount_path "/" cannot copy /etc/hostname: the job fails naming the directory and --allow-roots', async () => {
  const source = await connection({ type: 'nfs', host: 'agent-host.invalid', path: '/etc', options: { mount_path: '/' } });
  const destination = await connection({ type: 'nfs', host: 'agent-host.invalid', path: '/', options: { mount_path: data } });
  const job = await stack.api.data('POST', '/transfers', { name: 'hostname', sourceConnectionId: source, sourcePath: '/hostname', destinationConnectionId: destination, destinationPath: '/' });
  await stack.api.call('POST', `/transfers/${job.id}/execute?wait=false`);
  let current = job;
  for (const deadline = Date.now() + 30_000; (current.status === 'queued' || current.status === 'in-progress') && Date.now() < deadline;) {
    await new Promise((r) => setTimeout(r, 100));
    current = await stack.api.data('GET', `/transfers/${job.id}`);
  }
  expect(current).toMatchObject({ status: 'failed', error: expect.stringContaining(`the agent may not use the local directory /etc: the agent exposes only ${data}; allow a directory with --allow-roots`) });
  expect(existsSync(join(data, 'hostname'))).toBe(false);
}, 60_000);

test('inside the allowed root the same connection tests green', async () => {
  const id = await connection({ type: 'nfs', host: 'agent-host.invalid', path: '/', options: { mount_path: data } });
  expect(await stack.api.data('POST', `/connections/${id}/test`, undefined, 200)).toMatchObject({ success: true });
}, 60_000);

test('a denied host fails the connection test naming the address and --deny-hosts', async () => {
  const id = await connection({
    type: 'sftp', host: env.XFER_TEST_SFTP_HOST, port: Number(env.XFER_TEST_SFTP_PORT), path: env.XFER_TEST_SFTP_ROOT,
    credentials: { username: env.XFER_TEST_SFTP_USER, password: env.XFER_TEST_SFTP_PASSWORD },
  });
  expect(await stack.api.data('POST', `/connections/${id}/test`, undefined, 200)).toMatchObject({
    success: false, message: expect.stringMatching(/the agent may not connect to 127\.0\.0\.1: 127\.0\.0\.1 is in "127\.0\.0\.0\/8" of the agent's --deny-hosts/),
  });
}, 60_000);

test('the agent logs what it allows when it starts', () => {
  const log = stack.agents[0]!.output();
  const started = log.split('\n').find((line) => line.includes('xfer-agent starting'));
  expect(JSON.parse(started!)).toMatchObject({ allow_roots: [data], allow_hosts: [], deny_hosts: ['127.0.0.0/8', '::1'] });
});
