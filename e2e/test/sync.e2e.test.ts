import { randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, rmSync } from 'node:fs';
import { join, posix } from 'node:path';
import { Readable } from 'node:stream';
import { DeleteBucketCommand, DeleteObjectsCommand, ListObjectsV2Command, type S3Client } from '@aws-sdk/client-s3';
import type { ConnectionSettings, ConnectionType } from '@xfer/shared';
import { createNfsConnector } from '@xfer/agent/dist/connectors/nfs/nfs.connector.js';
import { startStack, type Api, type Stack } from '../src/stack.js';
import {
  changeTree, generateTree, localPlace, s3Client, s3Place, servedPlace, treeDiff, type TreeChanges, type TreePlace, type TreeWriter,
} from '../src/tools/trees.js';
import { cliEnv, jsonOf, runCli } from './support/cli.js';
import { FIXTURES } from './support/connections.js';
import { fileResults, waitFor, type FileRecord } from './support/stack-helpers.js';

/**
 * Sync (issue 25 "Acceptance") through the real xfer-server and xfer-agent on the real sftp, s3,
 * smb and nfs test servers: a tree synced, then 10 files changed, 10 deleted and 10 added at the
 * source, synced again → the destination equals the source byte for byte, the second run's
 * per-file results hold exactly those 30 actions, and no other destination file was written.
 * Then what must never delete (a failed copy, `max_delete` exceeded), a filtered-out directory
 * that is never listed, and plans: the apply does exactly the plan's items, a file changed since
 * the plan is left and reported, and `xfer sync --dry-run` / `--json` through the CLI binary.
 */
const env = process.env;
const run = randomBytes(4).toString('hex');
const SIZE = 60;

let stack: Stack;
let s3: S3Client;
const buckets: string[] = [];
const localDirs: string[] = [];
const clients: Array<{ close(): Promise<void> }> = [];

/** Where each type's test server keeps a place's files on this machine, and the login that must own them. */
const LOCAL: Partial<Record<ConnectionType, { root: string; owner?: string }>> = {
  sftp: { root: env.XFER_TEST_SFTP_ROOT!, owner: env.XFER_TEST_SFTP_USER },
  smb: { root: env.XFER_TEST_SMB_ROOT!, owner: env.XFER_TEST_SMB_USER },
  nfs: { root: env.XFER_TEST_NFS_ROOT! },
};

/** One side of a sync: a connection whose base is a fresh place on `type`'s server, and the tree under its `/tree`. */
interface Side { type: ConnectionType; id: string; tree: TreePlace; dir?: string }

async function side(type: ConnectionType, label: string): Promise<Side> {
  const place = `sync-${run}-${label}`;
  await FIXTURES[type]!.prepare(place);
  const id = (await stack.api.data<{ id: string }>('POST', '/connections', { name: `sync ${label} ${type}`, ...FIXTURES[type]!.body(place) })).id;
  if (type === 's3') {
    buckets.push(place);
    return { type, id, tree: s3Place(s3, place, 'tree') };
  }
  const local = LOCAL[type]!;
  const dir = join(local.root, place);
  localDirs.push(dir);
  if (type === 'nfs') return { type, id, tree: servedPlace(join(dir, 'tree'), await nfsWriter(place)), dir };
  return { type, id, tree: localPlace(join(dir, 'tree'), local.owner), dir };
}

/**
 * Writes and deletes below `<place>/tree` of the test NFS server through NFS: the agent's nfs
 * connector, used as a plain NFS client (the only one on this machine that deletes; nfs-ganesha
 * would not see changes made on its disk for a minute).
 */
async function nfsWriter(place: string): Promise<TreeWriter> {
  const settings = { id: '0'.repeat(24), name: 'test writer', agent_id: null, options: {}, ...FIXTURES.nfs!.body(place) } as unknown as ConnectionSettings;
  const nfs = createNfsConnector(settings);
  clients.push(nfs);
  return {
    async write(rel, data, mtime) {
      await nfs.mkdir(posix.dirname(`tree/${rel}`));
      await nfs.write(`tree/${rel}`, Readable.from([data]), { size: data.length, modifiedAt: mtime });
    },
    remove: (rel) => nfs.remove(`tree/${rel}`),
  };
}

interface Outcome {
  id: string;
  done: { success: boolean; status?: string; error?: string | null; files_transferred: number };
  job: { status: string; error: string | null; files_deleted?: number; files_failed: number };
  results: Map<string, FileRecord>;
}

/** A new transfer `/tree` → `/tree` with `options` (mode sync unless given), executed to its end (`body`: the execute body). */
async function sync(api: Api, from: Side, to: Side, options: Record<string, unknown> = {}, body?: unknown, id?: string): Promise<Outcome> {
  const jobId = id ?? (await api.data<{ id: string }>('POST', '/transfers', {
    name: `sync ${from.type} to ${to.type}`, sourceConnectionId: from.id, sourcePath: '/tree',
    destinationConnectionId: to.id, destinationPath: '/tree', options: { mode: 'sync', ...options },
  })).id;
  const done = await api.call('POST', `/transfers/${jobId}/execute`, body);
  expect(done.status).toBe(200);
  const job = await api.data('GET', `/transfers/${jobId}`);
  return { id: jobId, done: done.body, job, results: await fileResults(api, jobId, 1) };
}

/** Paths of the results with `status`, sorted. */
const withStatus = (results: Map<string, FileRecord>, status: string) => [...results.values()].filter((f) => f.status === status).map((f) => f.path).sort();
const sorted = (paths: Iterable<string>) => [...paths].sort();

/**
 * Waits until a write would change `place`'s stamps taken at `stampedAt`: a stamp of whole seconds
 * (an object's last-modified time) does not show a rewrite within the second it was taken in.
 */
async function pastStampSpan(place: TreePlace, stampedAt: number): Promise<void> {
  const span = place.stampResolutionMs;
  if (span > 0) await waitFor('the next span of the stamps\' clock', async () => Date.now(), (now) => Math.floor(now / span) > Math.floor(stampedAt / span), 5_000);
}

/** Expects the destination to hold exactly the source's files, byte for byte. */
async function expectEqualTrees(from: Side, to: Side): Promise<void> {
  const [source, destination] = await Promise.all([from.tree.digests(), to.tree.digests()]);
  expect(source.size).toBeGreaterThan(0);
  expect(treeDiff(source, destination)).toEqual([]);
}

beforeAll(async () => {
  s3 = s3Client(env);
  stack = await startStack({ env });
  await stack.startAgent('sync-agent');
}, 120_000);

afterAll(async () => {
  await stack?.stop();
  for (const client of clients) await client.close();
  for (const dir of localDirs) rmSync(dir, { recursive: true, force: true });
  for (const bucket of buckets) {
    for (;;) {
      const page = await s3.send(new ListObjectsV2Command({ Bucket: bucket }));
      const keys = (page.Contents ?? []).map((o) => ({ Key: o.Key! }));
      if (keys.length === 0) break;
      await s3.send(new DeleteObjectsCommand({ Bucket: bucket, Delete: { Objects: keys, Quiet: true } }));
    }
    await s3.send(new DeleteBucketCommand({ Bucket: bucket }));
  }
}, 120_000);

/** Each of sftp, s3, smb and nfs as a source and as a destination. */
const PAIRS: Array<[ConnectionType, ConnectionType]> = [['sftp', 's3'], ['s3', 'smb'], ['nfs', 'sftp'], ['smb', 'nfs']];

describe.each(PAIRS)('%s → %s', (fromType, toType) => {
  let from: Side;
  let to: Side;
  let paths: string[];

  beforeAll(async () => {
    from = await side(fromType, `${fromType}-to-${toType}-src`);
    to = await side(toType, `${fromType}-to-${toType}-dst`);
    paths = await generateTree(from.tree, SIZE);
  }, 120_000);

  test('the first sync copies the whole tree, byte-identical', async () => {
    const first = await sync(stack.api, from, to);
    expect(first.done).toMatchObject({ success: true, files_transferred: SIZE });
    expect(withStatus(first.results, 'copied')).toEqual(sorted(paths));
    await expectEqualTrees(from, to);
  }, 180_000);

  test('10 changed, 10 deleted, 10 added: the second sync does exactly those 30 and writes nothing else', async () => {
    const before = await to.tree.stamps();
    const stampedAt = Date.now();
    const changes: TreeChanges = await changeTree(from.tree, paths, 10);
    await pastStampSpan(to.tree, stampedAt);
    const second = await sync(stack.api, from, to);

    // Any other file acted on, with the reason the run gave.
    const touched = new Set([...changes.changed, ...changes.added, ...changes.deleted]);
    const extra = [...second.results.values()].filter((f) => f.status !== 'skipped' && !touched.has(f.path));
    expect(extra.map((f) => `${f.status} ${f.path}: ${f.reason ?? f.error}`)).toEqual([]);
    expect(second.done).toMatchObject({ success: true, files_transferred: 20 });
    expect(second.job.files_deleted).toBe(10);
    expect(withStatus(second.results, 'copied')).toEqual(sorted([...changes.changed, ...changes.added]));
    expect(withStatus(second.results, 'deleted')).toEqual(sorted(changes.deleted));
    expect(withStatus(second.results, 'failed')).toEqual([]);
    // Whatever else is recorded is a file left as it was.
    const acted = [...second.results.values()].filter((f) => f.status !== 'skipped');
    expect(acted).toHaveLength(30);
    await expectEqualTrees(from, to);

    // No other destination file was written: same inode and ctime (a local file), same ETag and time (an object).
    const after = await to.tree.stamps();
    const rewritten = [...before].filter(([path, stamp]) => !touched.has(path) && after.get(path) !== stamp).map(([path]) => path);
    expect(rewritten).toEqual([]);
  }, 180_000);
});

describe('kept modification times: a plain copy, then a sync (s3 → sftp)', () => {
  let from: Side;
  let to: Side;

  beforeAll(async () => {
    from = await side('s3', 'kept-src');
    to = await side('sftp', 'kept-dst');
    // Objects carrying rclone's `mtime` metadata (an hour ago), as rclone or xfer itself writes them.
    await generateTree(from.tree, 10);
  }, 120_000);

  test('a copy (no mode) gives each file the kept mtime, not the object\'s upload time; a sync then has nothing to do', async () => {
    const job = await stack.api.data<{ id: string }>('POST', '/transfers', {
      name: 'plain copy', sourceConnectionId: from.id, sourcePath: '/tree', destinationConnectionId: to.id, destinationPath: '/tree',
    });
    const copied = await stack.api.call('POST', `/transfers/${job.id}/execute`);
    expect(copied.body).toMatchObject({ success: true, files_transferred: 10 });
    const kept = await from.tree.mtimes();
    const written = await to.tree.mtimes();
    expect([...written].filter(([path, at]) => Math.abs(at - kept.get(path)!) > 1000).map(([path, at]) => `${path}: ${new Date(at).toISOString()} for ${new Date(kept.get(path)!).toISOString()}`)).toEqual([]);

    const again = await sync(stack.api, from, to);
    expect(withStatus(again.results, 'copied')).toEqual([]);
    expect(again.done).toMatchObject({ success: true, files_transferred: 0 });
  }, 180_000);
});

describe('what a sync never deletes (sftp → s3)', () => {
  let from: Side;
  let to: Side;
  let paths: string[];
  let gone: string[];

  beforeAll(async () => {
    from = await side('sftp', 'safety-src');
    to = await side('s3', 'safety-dst');
    paths = await generateTree(from.tree, 30);
    const first = await sync(stack.api, from, to);
    expect(first.done).toMatchObject({ success: true, files_transferred: 30 });
    gone = [paths[3]!, paths[7]!, paths[11]!];
    for (const rel of gone) await from.tree.remove(rel);
  }, 180_000);

  test('a failed copy in the run: nothing is deleted', async () => {
    // Unreadable to the sftp user: its copy fails every time.
    const unreadable = paths[5]!;
    await from.tree.write(unreadable, randomBytes(321), new Date());
    chmodSync(join(from.dir!, 'tree', unreadable), 0o000);
    try {
      const failed = await sync(stack.api, from, to);
      expect(failed.done.success).toBe(false);
      expect(withStatus(failed.results, 'failed')).toEqual([unreadable]);
      expect(withStatus(failed.results, 'deleted')).toEqual([]);
      expect(failed.job.files_deleted ?? 0).toBe(0);
      const destination = await to.tree.digests();
      for (const rel of gone) expect(destination.has(rel)).toBe(true);
    } finally {
      chmodSync(join(from.dir!, 'tree', unreadable), 0o644);
    }
  }, 180_000);

  test('max_delete exceeded: no deletion and an error naming max_delete', async () => {
    const refused = await sync(stack.api, from, to, { max_delete: 2 });
    expect(refused.done.success).toBe(false);
    expect(refused.job.error).toMatch(/max_delete/);
    expect(refused.job.error).toMatch(/\b3\b/);
    expect(withStatus(refused.results, 'deleted')).toEqual([]);
    const destination = await to.tree.digests();
    for (const rel of gone) expect(destination.has(rel)).toBe(true);
  }, 180_000);

  test('within max_delete the deletions happen and the trees are equal', async () => {
    const allowed = await sync(stack.api, from, to, { max_delete: 3 });
    expect(allowed.done.success).toBe(true);
    expect(withStatus(allowed.results, 'deleted')).toEqual(sorted(gone));
    await expectEqualTrees(from, to);
  }, 180_000);
});

describe('filters (sftp → s3): an excluded directory is never listed', () => {
  let from: Side;
  let to: Side;
  let secret: string;

  beforeAll(async () => {
    from = await side('sftp', 'filter-src');
    to = await side('s3', 'filter-dst');
    await generateTree(from.tree, 20);
    await from.tree.write('secret/inner/hidden.bin', randomBytes(100));
    // The sftp user may not list it: any listing of it fails the run.
    secret = join(from.dir!, 'tree', 'secret');
    chmodSync(secret, 0o000);
  }, 120_000);

  afterAll(() => chmodSync(secret, 0o755));

  test('without the filter the run fails on the unreadable directory (the premise)', async () => {
    const unfiltered = await sync(stack.api, from, to);
    expect(unfiltered.done.success).toBe(false);
    expect(withStatus(unfiltered.results, 'deleted')).toEqual([]);
  }, 180_000);

  test('with `- /secret/**` the run succeeds: the directory was never listed, nothing of it copied', async () => {
    const filtered = await sync(stack.api, from, to, { filters: { rules: ['- /secret/**'] } });
    expect(filtered.done).toMatchObject({ success: true });
    const source = await from.tree.digests();
    const destination = await to.tree.digests();
    expect([...destination.keys()].filter((p) => p.startsWith('secret/'))).toEqual([]);
    source.delete('secret/inner/hidden.bin');
    expect(treeDiff(source, destination)).toEqual([]);
  }, 180_000);
});

/** A plan as GET /transfers/:id/plan gives it. */
interface Plan { id: string; status: string; summary?: Record<string, number | string>; error?: string | null }
interface PlanItem { path: string; action: 'copy' | 'update' | 'delete' | 'skip'; reason: string }

/** Every item of a transfer's plan, all pages. */
async function planItems(api: Api, id: string): Promise<PlanItem[]> {
  const items: PlanItem[] = [];
  let cursor: string | null = null;
  do {
    const page: { status: number; body: { data: PlanItem[]; next_cursor: string | null } } = await api.call('GET', `/transfers/${id}/plan/items?limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
    expect(page.status).toBe(200);
    items.push(...page.body.data);
    cursor = page.body.next_cursor;
  } while (cursor);
  return items;
}

const COMPUTING = new Set(['pending', 'computing', 'planning', 'queued', 'running']);

/** Makes the transfer's plan and waits until it is complete. */
async function makePlan(api: Api, id: string): Promise<Plan> {
  const made = await api.call<{ data: Plan }>('POST', `/transfers/${id}/plan`);
  expect([200, 201, 202]).toContain(made.status);
  const plan = await waitFor('the plan', () => api.data<Plan>('GET', `/transfers/${id}/plan`), (p) => !COMPUTING.has(p.status), 120_000);
  expect(plan.id).toBe(made.body.data.id);
  return plan;
}

const ofAction = (items: PlanItem[], action: PlanItem['action']) => items.filter((i) => i.action === action).map((i) => i.path).sort();

describe('plans (sftp → s3)', () => {
  let from: Side;
  let to: Side;
  let paths: string[];
  let home: string;
  /** The file the apply left (changed since its plan). */
  let late: string;

  beforeAll(async () => {
    from = await side('sftp', 'plan-src');
    to = await side('s3', 'plan-dst');
    paths = await generateTree(from.tree, SIZE);
    const first = await sync(stack.api, from, to);
    expect(first.done).toMatchObject({ success: true, files_transferred: SIZE });
    home = join(from.dir!, '..', `sync-${run}-cli-home`);
    mkdirSync(home, { recursive: true });
    localDirs.push(home);
  }, 180_000);

  test('the apply does exactly the plan; a source file changed since the plan is left and reported', async () => {
    const changes = await changeTree(from.tree, paths, 10);
    const job = await stack.api.data<{ id: string }>('POST', '/transfers', {
      name: 'planned sync', sourceConnectionId: from.id, sourcePath: '/tree',
      destinationConnectionId: to.id, destinationPath: '/tree', options: { mode: 'sync' },
    });
    const unplanned = await to.tree.stamps();
    await pastStampSpan(to.tree, Date.now());
    const plan = await makePlan(stack.api, job.id);
    // A plan writes nothing.
    expect(await to.tree.stamps()).toEqual(unplanned);
    expect(plan.summary).toMatchObject({ copy: 10, update: 10, delete: 10, skip: SIZE - 20 });
    const items = await planItems(stack.api, job.id);
    expect(ofAction(items, 'copy')).toEqual(sorted(changes.added));
    expect(ofAction(items, 'update')).toEqual(sorted(changes.changed));
    expect(ofAction(items, 'delete')).toEqual(sorted(changes.deleted));
    const destinationBefore = await to.tree.digests();

    // Changed again after the plan: the apply must leave it.
    late = changes.changed[0]!;
    await from.tree.write(late, randomBytes(4321), new Date());
    // A file that appears after the plan is not in it: the apply must not copy it.
    await from.tree.write('after-the-plan.bin', randomBytes(10), new Date());

    const applied = await sync(stack.api, from, to, {}, { plan_id: plan.id }, job.id);
    expect(applied.done.success).toBe(true);
    const acted = [...applied.results.values()].filter((f) => f.status !== 'skipped');
    const expected = items.filter((i) => i.action !== 'skip' && i.path !== late)
      .map((i) => ({ path: i.path, status: i.action === 'delete' ? 'deleted' : 'copied' })).sort((a, b) => a.path.localeCompare(b.path));
    expect(acted.map((f) => ({ path: f.path, status: f.status })).sort((a, b) => a.path.localeCompare(b.path))).toEqual(expected);
    expect(applied.results.get(late)).toMatchObject({ status: 'skipped', reason: 'changed since plan' });
    expect(applied.results.has('after-the-plan.bin')).toBe(false);

    const destination = await to.tree.digests();
    expect(destination.get(late)).toBe(destinationBefore.get(late));
    expect(destination.has('after-the-plan.bin')).toBe(false);
    const source = await from.tree.digests();
    source.delete('after-the-plan.bin');
    source.set(late, destinationBefore.get(late)!);
    expect(treeDiff(source, destination)).toEqual([]);
  }, 240_000);

  /** `xfer …` as a user runs it, against this stack. */
  const xfer = (args: string[]) => runCli(args, { env: cliEnv(home, { XFER_URL: stack.url, XFER_API_KEY: stack.api.token }), timeoutMs: 180_000 });

  test('`xfer sync --dry-run` prints what it would do and writes nothing; `--json` gives the plan', async () => {
    // The plan test left two differences: the file changed after its plan, and the file added after it.
    const before = await to.tree.stamps();
    await pastStampSpan(to.tree, Date.now());
    const src = `${from.id}:/tree`;
    const dst = `${to.id}:/tree`;

    const dry = xfer(['sync', src, dst, '--dry-run']);
    expect(dry.stderr).not.toMatch(/Error/);
    expect(dry.status).toBe(0);
    const row = (path: string) => dry.stdout.split('\n').find((l) => l.includes(path)) ?? '';
    expect(row('after-the-plan.bin')).toMatch(/^\s*copy\b/);
    expect(row(late)).toMatch(/^\s*update\b/);

    const json = jsonOf<{ transfer: { id: string }; plan: { id: string; summary: Record<string, number> }; items: PlanItem[] }>(xfer(['sync', src, dst, '--dry-run', '--json']));
    expect(json.plan.summary).toMatchObject({ copy: 1, update: 1, delete: 0 });
    // The items it prints are the plan's, unchanged files left out (they are counted in the summary).
    expect(json.items.map((i) => `${i.action} ${i.path}`).sort()).toEqual([`update ${late}`, 'copy after-the-plan.bin'].sort());
    expect((await planItems(stack.api, json.transfer.id)).filter((i) => i.action !== 'skip')).toEqual(json.items);
    // Nothing was written by either dry run.
    expect(await to.tree.stamps()).toEqual(before);

    // Without --dry-run it applies the plan: the trees are then equal.
    const done = jsonOf<{ status: string; files_transferred: number; files_deleted: number }>(xfer(['sync', src, dst, '--json']));
    expect(done).toMatchObject({ status: 'completed', files_transferred: 2, files_deleted: 0 });
    await expectEqualTrees(from, to);
  }, 240_000);
});
