import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { CreateBucketCommand, type S3Client } from '@aws-sdk/client-s3';
import { startStack, type Api, type Proc, type Stack } from '../../src/stack.js';
import { s3Client } from './trees.js';

/** Polls `get` until `ok` holds; throws with the last value after `timeoutMs`. */
export async function waitFor<T>(what: string, get: () => Promise<T>, ok: (value: T) => boolean, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await get();
    if (ok(value)) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}: last ${JSON.stringify(value)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * An sftp connection on the test sshd (base path `sftpRoot`) and an s3 connection on the test
 * versitygw (bucket `bucket`, which must exist), made through the stack's API; `extra` is added
 * to both (say, `agent_pool`).
 */
export async function sftpAndS3(stack: Pick<Stack, 'api'>, name: string, sftpRoot: string, bucket: string, extra: Record<string, unknown> = {}): Promise<{ sftp: string; s3: string }> {
  const env = process.env;
  const sftp = (await stack.api.data('POST', '/connections', {
    name: `${name} sftp`, type: 'sftp', host: env.XFER_TEST_SFTP_HOST, port: Number(env.XFER_TEST_SFTP_PORT), path: sftpRoot,
    credentials: { username: env.XFER_TEST_SFTP_USER, password: env.XFER_TEST_SFTP_PASSWORD }, ...extra,
  })).id as string;
  const s3 = (await stack.api.data('POST', '/connections', {
    name: `${name} s3`, type: 's3', host: env.XFER_TEST_S3_HOST, port: Number(env.XFER_TEST_S3_PORT), path: `/${bucket}`,
    options: { secure: false, force_path_style: true },
    credentials: { access_key_id: env.XFER_TEST_S3_ACCESS_KEY, secret_access_key: env.XFER_TEST_S3_SECRET_KEY }, ...extra,
  })).id as string;
  return { sftp, s3 };
}

/** One file's result in one run (GET /transfers/:id/files). */
export interface FileRecord { path: string; attempt: number; status: string; size: number; sha256: string | null; verified_by: string | null; reason?: string | null; error?: string | null }

/** Every per-file result of one attempt, all pages, by path. */
export async function fileResults(api: Api, id: string, attempt: number): Promise<Map<string, FileRecord>> {
  const all = new Map<string, FileRecord>();
  let cursor: string | null = null;
  do {
    const page: { status: number; body: { data: FileRecord[]; next_cursor: string | null } } = await api.call('GET', `/transfers/${id}/files?attempt=${attempt}&limit=1000${cursor ? `&cursor=${cursor}` : ''}`);
    expect(page.status).toBe(200);
    for (const f of page.body.data) all.set(f.path, f);
    cursor = page.body.next_cursor;
  } while (cursor);
  return all;
}

/** An agent's JSON log lines since it started. */
export function agentLines(proc: Proc): Array<Record<string, any>> {
  return proc.output().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, any>);
}

/** The instance (index in `stack.urls`) an agent's latest session is on, and since when, as the agent logged it. */
export function instanceOf(stack: Stack, proc: Proc): { index: number; at: number } {
  const connected = agentLines(proc).filter((l) => l.msg === 'connected to the control plane').at(-1);
  if (!connected) throw new Error(`agent not connected:\n${proc.output()}`);
  const port = new URL(connected.url as string).port;
  return { index: stack.urls.findIndex((u) => new URL(u).port === port), at: Date.parse(connected.time as string) };
}

/** A transfer's state as the API reads it: still waiting for an agent or running. */
export const unfinished = (j: { status: string }) => j.status === 'queued' || j.status === 'in-progress';

/** What `sftpAndS3Suite` sets up: filled in by its beforeAll. */
export interface SftpAndS3Suite {
  stack: Stack;
  s3: S3Client;
  ids: { sftp: string; s3: string };
  /** A bucket of this suite's own, and a directory of its own on the test sshd (the sftp connection's base). */
  bucket: string;
  sftpRoot: string;
  /** Gives what the test wrote below `sftpRoot` to the sftp user. */
  chownToSftpUser: () => void;
}

/**
 * Registers the beforeAll/afterAll of a suite that runs a stack with an sftp and an s3 connection
 * of its own (`name` prefixes the bucket and the directory), the control plane started with `serverEnv`.
 */
export function sftpAndS3Suite(name: string, serverEnv: Record<string, string>): SftpAndS3Suite {
  const env = process.env;
  const run = randomBytes(4).toString('hex');
  const sftpRoot = join(env.XFER_TEST_SFTP_ROOT!, `${name}-${run}`);
  const suite = {
    bucket: `${name}-${run}`, sftpRoot, ids: { sftp: '', s3: '' },
    chownToSftpUser: () => { spawnSync('chown', ['-R', `${env.XFER_TEST_SFTP_USER}:`, sftpRoot]); },
  } as SftpAndS3Suite;
  beforeAll(async () => {
    suite.s3 = s3Client(env);
    await suite.s3.send(new CreateBucketCommand({ Bucket: suite.bucket }));
    suite.stack = await startStack({ env, serverEnv });
    Object.assign(suite.ids, await sftpAndS3(suite.stack, name, sftpRoot, suite.bucket));
  }, 120_000);
  afterAll(async () => {
    await suite.stack?.stop();
    rmSync(sftpRoot, { recursive: true, force: true });
  }, 60_000);
  return suite;
}
