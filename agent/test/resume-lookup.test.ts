import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { FileResult } from '@xfer/shared';
import { assignPayload, testAgent } from './helpers/test-agent.js';
import { TestControlPlane, type AgentConnection } from './helpers/test-control-plane.js';
import { rmTemp, sha256, tempDir, writeTree } from './helpers/tree.js';

/**
 * A resume run of the real Agent against a control plane speaking the protocol over a real
 * WebSocket: it asks which files earlier attempts verified (`job.verified.query`), skips those,
 * and follows the overwrite policy for the rest, and when the control plane cannot answer.
 */
let server: TestControlPlane;
let src: string;
let dst: string;
beforeEach(async () => {
  server = await TestControlPlane.start();
  src = tempDir('xfer-rsrc-');
  dst = tempDir('xfer-rdst-');
  writeTree(src, { 'a.txt': 'aaaa', 'b.txt': 'bbbb', 'c.txt': 'cccc' });
  // a: verified by attempt 1; b: a same-size stale file no attempt wrote; c: missing.
  writeTree(dst, { 'a.txt': 'AAAA', 'b.txt': 'BBBB' });
});
afterEach(async () => {
  await server.close();
  rmTemp(src);
  rmTemp(dst);
});

async function connected(welcome: Parameters<AgentConnection['welcome']>[0], verifiedQueryTimeoutMs?: number) {
  const { agent, log } = testAgent(server.connectUrl, verifiedQueryTimeoutMs ? { verifiedQueryTimeoutMs } : {});
  const running = agent.run();
  const conn = await server.connection(0);
  await conn.welcome(welcome);
  return { agent, log, running, conn };
}

const results = (conn: AgentConnection): Record<string, FileResult> =>
  Object.fromEntries(conn.all('job.progress').flatMap((m) => m.payload.files).map((f) => [f.path, f]));

test('a resume run asks, skips what attempt 1 verified and is still there, and copies a same-size stale file under always', async () => {
  const { agent, running, conn } = await connected({ verified_lookup: true });
  conn.send('job.assign', assignPayload('job-r', src, dst, { attempt: 2, resume: true, options: { overwrite: 'always', verify: 'checksum', concurrency: 2 } }));
  const query = await conn.next('job.verified.query');
  expect(query.payload.job_id).toBe('job-r');
  expect([...query.payload.paths].sort()).toEqual(['a.txt', 'b.txt', 'c.txt']);
  conn.send('job.verified', { request_id: query.payload.request_id, files: [{ path: 'a.txt', size: 4, attempt: 1, sha256: sha256('aaaa') }] });
  expect((await conn.next('job.completed')).payload).toMatchObject({ files_transferred: 2, files_skipped: 1 });
  expect(results(conn)).toMatchObject({
    'a.txt': { status: 'skipped', verified_by: 'attempt 1', sha256: sha256('aaaa') },
    'b.txt': { status: 'copied' },
    'c.txt': { status: 'copied' },
  });
  expect(readFileSync(join(dst, 'a.txt'), 'utf8')).toBe('AAAA');
  expect(readFileSync(join(dst, 'b.txt'), 'utf8')).toBe('bbbb');
  await agent.shutdown('test');
  await running;
});

test('a control plane that does not announce the lookup is never asked: the policy alone decides', async () => {
  const { agent, running, conn, log } = await connected({});
  conn.send('job.assign', assignPayload('job-o', src, dst, { attempt: 2, resume: true, options: { overwrite: 'always', verify: 'checksum', concurrency: 2 } }));
  expect((await conn.next('job.completed')).payload).toMatchObject({ files_transferred: 3, files_skipped: 0 });
  expect(conn.all('job.verified.query')).toEqual([]);
  expect(conn.invalid).toEqual([]);
  expect(log.text).toContain('the results of earlier attempts are not available');
  await agent.shutdown('test');
  await running;
});

test('no answer in time: the run stops asking and follows the policy (if_changed keeps a same-size newer file)', async () => {
  const { agent, running, conn, log } = await connected({ verified_lookup: true }, 200);
  conn.send('job.assign', assignPayload('job-t', src, dst, { attempt: 2, resume: true }));
  await conn.next('job.verified.query');
  expect((await conn.next('job.completed')).payload).toMatchObject({ files_transferred: 1, files_skipped: 2 });
  expect(results(conn)).toMatchObject({ 'a.txt': { status: 'skipped' }, 'b.txt': { status: 'skipped' }, 'c.txt': { status: 'copied' } });
  expect(results(conn)['a.txt']!.verified_by).toBeUndefined();
  expect(conn.all('job.verified.query')).toHaveLength(1);
  expect(log.text).toContain('no answer from the control plane within 200 ms');
  await agent.shutdown('test');
  await running;
});
