import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { FileResult, PlanItem } from '@xfer/shared';
import { assignPayload, settings, testAgent } from './helpers/test-agent.js';
import { TestControlPlane, type AgentConnection } from './helpers/test-control-plane.js';
import { rmTemp, sha256, snapshot, tempDir, writeTree } from './helpers/tree.js';

let server: TestControlPlane;
let src: string;
let dst: string;
beforeEach(async () => {
  server = await TestControlPlane.start();
  src = tempDir('xfer-psrc-');
  dst = tempDir('xfer-pdst-');
});
afterEach(async () => {
  await server.close();
  rmTemp(src);
  rmTemp(dst);
});

async function connected() {
  const { agent } = testAgent(server.connectUrl);
  const running = agent.run();
  const conn = await server.connection(0);
  const hello = await conn.welcome();
  return { agent, running, conn, hello };
}

const SYNC = { overwrite: 'if_changed', verify: 'size', concurrency: 2, mode: 'sync' } as const;

/** Answers the agent's `job.plan.query`s from `items` as the control plane would: after the last path, at most `limit`. */
function servePlan(conn: AgentConnection, items: PlanItem[]): void {
  const previous = conn.onMessage;
  conn.onMessage = (m) => {
    previous?.(m);
    if (m.type !== 'job.plan.query') return;
    const { after, limit, request_id } = m.payload;
    const rest = items.filter((i) => after === undefined || Buffer.compare(Buffer.from(i.path), Buffer.from(after)) > 0);
    conn.send('job.plan.page', { request_id, items: rest.slice(0, limit), done: rest.length <= limit });
  };
}

describe('plans on the agent', () => {
  test('plan.assign: items in path order in plan.items batches from seq 1, then plan.done; nothing written; hello says sync', async () => {
    writeTree(src, { 'a.txt': 'a', 'b/c.txt': 'c', 'same.txt': 'same' });
    writeTree(dst, { 'gone.txt': 'old', 'same.txt': 'same' });
    const before = snapshot(dst);
    const { agent, running, conn, hello } = await connected();
    expect(hello.payload.sync).toBe(true);
    conn.send('plan.assign', { plan_id: 'plan-1', source: settings(src), source_path: '/', destination: settings(dst), destination_path: '/', options: { ...SYNC, compare: 'checksum' } });
    const done = await conn.next('plan.done');
    const batches = conn.all('plan.items');
    expect(batches.map((b) => b.payload.seq)).toEqual([1]);
    expect(done.payload).toMatchObject({ plan_id: 'plan-1', batches: 1, summary: { copy: 2, update: 0, delete: 1, skip: 1, copy_bytes: 2, delete_bytes: 3 } });
    expect(done.payload.fingerprint).toMatch(/^[0-9a-f]{64}$/);
    expect(batches[0]!.payload.items.map((i) => [i.path, i.action, i.reason])).toEqual([
      ['a.txt', 'copy', 'not at the destination'], ['b/c.txt', 'copy', 'not at the destination'], ['gone.txt', 'delete', 'not in the source'], ['same.txt', 'skip', 'same sha256'],
    ]);
    expect(snapshot(dst)).toEqual(before);
    await agent.shutdown('test');
    await running;
  });

  test('a plan of a missing source path fails with plan.failed naming it', async () => {
    const { agent, running, conn } = await connected();
    conn.send('plan.assign', { plan_id: 'plan-2', source: settings(src), source_path: '/nope', destination: settings(dst), destination_path: '/', options: SYNC });
    expect((await conn.next('plan.failed')).payload).toEqual({ plan_id: 'plan-2', error: 'source path /nope does not exist' });
    await agent.shutdown('test');
    await running;
  });

  test('job.assign with plan_id applies exactly the plan; a file changed since is left and reported "changed since plan"', async () => {
    writeTree(src, { 'a.txt': 'a', 'b.txt': 'b', 'keep.txt': 'k' });
    writeTree(dst, { 'gone.txt': 'old', 'keep.txt': 'k' });
    const { agent, running, conn } = await connected();
    conn.send('plan.assign', { plan_id: 'plan-3', source: settings(src), source_path: '/', destination: settings(dst), destination_path: '/', options: { ...SYNC, compare: 'size' } });
    await conn.next('plan.done');
    const items = conn.all('plan.items').flatMap((b) => b.payload.items);
    // After the plan: b.txt changes, and a file the plan never saw appears (not the apply's business).
    writeFileSync(join(src, 'b.txt'), 'changed');
    writeFileSync(join(src, 'new.txt'), 'new');
    servePlan(conn, items);
    conn.send('job.assign', assignPayload('job-plan', src, dst, { options: SYNC, plan_id: 'plan-3' }));
    const completed = await conn.next('job.completed');
    expect(completed.payload).toMatchObject({ files_transferred: 1, files_deleted: 1, files_failed: 0 });
    const files: FileResult[] = conn.all('job.progress').flatMap((m) => m.payload.files);
    expect(files.find((f) => f.path === 'b.txt')).toMatchObject({ status: 'skipped', reason: 'changed since plan' });
    expect(files.find((f) => f.path === 'gone.txt')).toMatchObject({ status: 'deleted', reason: 'not in the source', size: 3 });
    expect(snapshot(dst)).toEqual({ 'a.txt': sha256('a'), 'keep.txt': sha256('k') });
    await agent.shutdown('test');
    await running;
  });

  test('move is refused through a relay with a clear error', async () => {
    const { agent, running, conn } = await connected();
    const { source: _relayed, ...assign } = assignPayload('0123456789abcdef01234567', src, dst, { relay: { source_type: 'sftp' }, options: { ...SYNC, mode: 'move' } });
    conn.send('job.assign', assign);
    const failed = await conn.next('job.failed');
    expect(failed.payload.error).toMatch(/^move is not supported through a relay/);
    await agent.shutdown('test');
    await running;
  });
});
