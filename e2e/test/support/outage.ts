import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CreateBucketCommand, ListObjectsV2Command, type S3Client } from '@aws-sdk/client-s3';
import { startStack, stopProc, type Stack } from '../../src/stack.js';
import { sftpAndS3, unfinished, waitFor } from './stack-helpers.js';
import { digestBucket, s3Client, treeDiff, writeTree } from './trees.js';

/**
 * kill -9 of the control plane while an agent copies a few hundred files from sftp to s3, the
 * control plane back on the same port and database after `downMs`: the job must end `completed`
 * with counters equal to what is at the destination, counted through the raw S3 server. The job
 * lease is far shorter than the outage, so a lease counted across it would fail the job. The
 * agent keeps its reports in 4 KiB of memory, so those of the outage wait on disk.
 */
export async function serverOutage(downMs: number): Promise<void> {
  const env = process.env;
  const run = randomBytes(4).toString('hex');
  const bucket = `e2e-outage-${run}`;
  const sftpRoot = join(env.XFER_TEST_SFTP_ROOT!, `e2e-outage-${run}`);
  const stateDir = mkdtempSync(join(tmpdir(), 'xfer-agent-state-'));
  const s3 = s3Client(env);
  let stack: Stack | undefined;
  try {
    await s3.send(new CreateBucketCommand({ Bucket: bucket }));
    // 300 files and one of 150 MiB: the agent is still copying when the server dies (checked below).
    const expected = await writeTree(join(sftpRoot, 'src'), { count: 300, bigBytes: 150 * 1024 * 1024 });
    spawnSync('chown', ['-R', `${env.XFER_TEST_SFTP_USER}:`, sftpRoot]);
    stack = await startStack({ env, serverEnv: { XFER_JOB_LEASE_MS: '4000', XFER_AGENT_HEARTBEAT_MS: '500', XFER_DISPATCH_POLL_MS: '100' } });
    const api = stack.api;
    const { sftp, s3: dest } = await sftpAndS3(stack, 'outage', sftpRoot, bucket);
    const agent = await stack.startAgent('outage-agent', { XFER_AGENT_STATE_DIR: stateDir, XFER_AGENT_OUTBOX_MEMORY_BYTES: '4096' });
    const created = await api.data('POST', '/transfers', {
      name: 'outage', sourceConnectionId: sftp, sourcePath: '/src', destinationConnectionId: dest, destinationPath: '/dst', options: { concurrency: 2 },
    });
    const id = created.id as string;
    expect((await api.call('POST', `/transfers/${id}/execute?wait=false`)).status).toBe(202);
    const job = () => api.data('GET', `/transfers/${id}`);
    const before = await waitFor('files copied', job, (j) => j.files_transferred >= 20 || !unfinished(j), 120_000);
    expect(before.status).toBe('in-progress');

    await stack.killServer();
    const killedAt = Date.now();
    await new Promise((r) => setTimeout(r, downMs));
    await stack.restartServer();

    const final = await waitFor('the job to end', job, (j) => j.status !== 'in-progress', 180_000);
    // The agent really was mid-job when the server died: it finished the job after the kill.
    const ends = agentLines(agent.proc.output()).filter((l) => l.msg === 'job completed' && l.job_id === id);
    expect(ends).toHaveLength(1);
    expect(Date.parse(ends[0]!.time)).toBeGreaterThan(killedAt);

    const objects = await listObjects(s3, bucket, 'dst/');
    expect(final).toMatchObject({ status: 'completed', error: null, files_total: expected.size, files_failed: 0 });
    expect(final.files_transferred).toBe(objects.count);
    expect(final.bytes_transferred).toBe(objects.bytes);
    expect(treeDiff(expected, (await digestBucket(s3, bucket, 'dst')).files)).toEqual([]);
    // Every file result reached the database, those of the outage too.
    expect(await countFiles(stack, id)).toBe(expected.size);
    await stopProc(agent.proc);
  } finally {
    await stack?.stop();
    rmSync(sftpRoot, { recursive: true, force: true });
    rmSync(stateDir, { recursive: true, force: true });
  }
}

/** The agent's JSON log lines. */
function agentLines(output: string): Array<{ msg?: string; job_id?: string; time: string }> {
  return output.split('\n').flatMap((line) => {
    try {
      return [JSON.parse(line)];
    } catch {
      return [];
    }
  });
}

/** Objects (not `dir/` markers) under `prefix` and their total size, from the raw server. */
async function listObjects(s3: S3Client, bucket: string, prefix: string): Promise<{ count: number; bytes: number }> {
  let count = 0;
  let bytes = 0;
  let token: string | undefined;
  do {
    const page = await s3.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix, ContinuationToken: token }));
    for (const o of page.Contents ?? []) {
      if (o.Key!.endsWith('/')) continue;
      count++;
      bytes += o.Size ?? 0;
    }
    token = page.NextContinuationToken;
  } while (token);
  return { count, bytes };
}

async function countFiles(stack: Stack, id: string): Promise<number> {
  let count = 0;
  let cursor: string | null = null;
  do {
    const page: { data: unknown[]; next_cursor: string | null } = (await stack.api.call('GET', `/transfers/${id}/files?status=copied&limit=100${cursor ? `&cursor=${cursor}` : ''}`)).body;
    count += page.data.length;
    cursor = page.next_cursor;
  } while (cursor);
  return count;
}
