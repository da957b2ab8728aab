import { existsSync, readFileSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import type { ConnectionSettings } from '@xfer/shared';
import { AgentAccess } from '../src/connectors/access.js';
import { assignPayload, testAgent } from './helpers/test-agent.js';
import { TestControlPlane } from './helpers/test-control-plane.js';
import { allowingRoots, rmTemp, tempDir, writeTree } from './helpers/tree.js';

/**
 * The agent's local roots (allow_roots), through the real connector registry as a job and a
 * connection test reach it: an nfs connection with options.mount_path exposes a directory of the
 * agent's host only inside a root its owner allowed. Issue 12: `mount_path: "/"` copied
 * /etc/hostname of the agent's host to the destination.
 */
let server: TestControlPlane;
let data: string;
let dst: string;
beforeEach(async () => {
  server = await TestControlPlane.start();
  data = tempDir('xfer-roots-data-');
  dst = tempDir('xfer-roots-dst-');
});
afterEach(async () => {
  await server.close();
  rmTemp(data);
  rmTemp(dst);
});

/** An nfs connection on a directory of the agent's host (mounted mode). */
function mounted(mountPath: string, path = '/'): ConnectionSettings {
  return { id: 'c'.repeat(24), name: `mounted ${mountPath}`, type: 'nfs', host: null, port: 2049, path, options: { mount_path: mountPath }, agent_id: null, credentials: {} };
}

/** An agent with the real connector registry and `access`, connected to the test control plane. */
async function agentWith(access: AgentAccess | undefined) {
  const { agent } = testAgent(server.connectUrl, { connectors: undefined, access });
  const running = agent.run();
  const conn = await server.connection(0);
  await conn.welcome();
  return { conn, stop: async () => { await agent.shutdown('test'); await running; } };
}

const ROOTS_HINT = 'allow a directory with --allow-roots, XFER_AGENT_ALLOW_ROOTS or "allow_roots" in the agent\'s config file';

describe('allow_roots: the local directories an agent exposes', () => {
  test('mount_path "/" cannot copy /etc/hostname of the agent host (the reproduction of issue 12)', async () => {
    const { conn, stop } = await agentWith(allowingRoots(dst));
    conn.send('job.assign', assignPayload('job-etc', '/', '/', { source: mounted('/', '/etc'), source_path: '/hostname', destination: mounted(dst) }));
    expect((await conn.next('job.failed')).payload).toMatchObject({
      job_id: 'job-etc', error: expect.stringContaining(`the agent may not use the local directory /etc: the agent exposes only ${dst}; ${ROOTS_HINT}`),
    });
    expect(existsSync(join(dst, 'hostname'))).toBe(false);
    await stop();
  });

  test('by default no directory at all, for jobs and connection tests alike', async () => {
    writeTree(data, { 'a.txt': 'a' });
    const { conn, stop } = await agentWith(undefined);
    conn.send('connection.test', { request_id: 't1', connection: mounted(data) });
    expect((await conn.next('connection.test.result')).payload).toMatchObject({
      request_id: 't1', success: false, message: `the agent may not use the local directory ${data}: the agent exposes no local directory (none is allowed by default); ${ROOTS_HINT}`,
    });
    conn.send('job.assign', assignPayload('job-none', '/', '/', { source: mounted(data), destination: mounted(dst) }));
    expect((await conn.next('job.failed')).payload.error).toContain('the agent exposes no local directory (none is allowed by default)');
    await stop();
  });

  test('inside an allowed root a job copies and a test passes', async () => {
    writeTree(data, { 'in/a.txt': 'alpha' });
    const { conn, stop } = await agentWith(allowingRoots(data, dst));
    conn.send('connection.test', { request_id: 't1', connection: mounted(data, '/in') });
    expect((await conn.next('connection.test.result')).payload).toMatchObject({ request_id: 't1', success: true });
    conn.send('job.assign', assignPayload('job-ok', '/', '/', { source: mounted(data, '/in'), destination: mounted(dst) }));
    expect((await conn.next('job.completed')).payload.job_id).toBe('job-ok');
    expect(readFileSync(join(dst, 'a.txt'), 'utf8')).toBe('alpha');
    await stop();
  });

  test('a path climbing out of the root, or a symbolic link inside it leading out, is refused', async () => {
    symlinkSync('/etc', join(data, 'etc-link'));
    const { conn, stop } = await agentWith(allowingRoots(data, dst));
    conn.send('connection.test', { request_id: 't1', connection: mounted(data, '/../../etc') });
    expect((await conn.next('connection.test.result')).payload).toMatchObject({ success: false, message: expect.stringContaining('the agent may not use the local directory /etc:') });
    conn.send('connection.test', { request_id: 't2', connection: mounted(data, '/etc-link') });
    expect((await conn.next('connection.test.result')).payload).toMatchObject({
      success: false, message: expect.stringContaining(`the agent may not use the local directory ${join(data, 'etc-link')} (really /etc): the agent exposes only ${data}, ${dst}`),
    });
    conn.send('job.assign', assignPayload('job-link', '/', '/', { source: mounted(data, '/etc-link'), source_path: '/hostname', destination: mounted(dst) }));
    expect((await conn.next('job.failed')).payload.error).toContain('(really /etc)');
    expect(existsSync(join(dst, 'hostname'))).toBe(false);
    await stop();
  });

  test('a root given as a symbolic link allows what it points to', async () => {
    writeTree(data, { 'f.txt': 'x' });
    const link = `${dst}-link`;
    symlinkSync(data, link);
    try {
      const { conn, stop } = await agentWith(new AgentAccess({ allowRoots: [link], allowHosts: [], denyHosts: [] }));
      conn.send('connection.test', { request_id: 't1', connection: mounted(link) });
      expect((await conn.next('connection.test.result')).payload).toMatchObject({ success: true });
      await stop();
    } finally {
      rmTemp(link);
    }
  });
});
