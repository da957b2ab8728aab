import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { MongoClient, ObjectId } from 'mongodb';
import { BINARIES, startStack, stopProc, type Stack } from '../src/stack.js';
import { FIXTURES } from './support/connections.js';
import { waitFor } from './support/stack-helpers.js';

/**
 * The master key rotation of docs/security.md "Key rotation", done as an operator does it with key
 * files on one host while the control plane runs and is written to (issue 24): two `xfer-server`
 * instances on one data dir and database, connections made on both, `rotate-keys --new-key`,
 * writes in between (sealed under the new key), `--drop-retired` refused while an instance that
 * has not yet looked at master.key would still seal under the old key, then accepted; both
 * instances restarted, and every connection's credentials open and work (a connection test
 * through a real agent against the test sftp server).
 */
const env = process.env;
const place = `e2e-rotation-${randomBytes(4).toString('hex')}`;
let stack: Stack;
let mongo: MongoClient;

beforeAll(async () => {
  await FIXTURES.sftp!.prepare(place);
  stack = await startStack({
    env,
    // Key files in the stack's data dir (no XFER_MASTER_KEY). Instance 0 reports itself every
    // second; instance 1 every 5 minutes, so it notices a new key only when it next seals.
    serverEnv: { XFER_MASTER_KEY: '', XFER_INSTANCE_HEARTBEAT_MS: '1000' },
    instances: 2,
    instanceEnv: (index): Record<string, string> => (index === 1 ? { XFER_INSTANCE_HEARTBEAT_MS: '300000' } : {}),
  });
  mongo = await new MongoClient(env.MONGODB_URI!).connect();
}, 180_000);

afterAll(async () => {
  await mongo?.close();
  await stack?.stop();
  rmSync(join(env.XFER_TEST_SFTP_ROOT!, place), { recursive: true, force: true });
}, 60_000);

const db = () => mongo.db(stack.serverEnv.XFER_DB_NAME!);

function rotateKeys(...args: string[]): { code: number | null; stderr: string; report: Record<string, any> } {
  const run = spawnSync(process.execPath, [BINARIES.server, 'rotate-keys', ...args], { env: stack.serverEnv as NodeJS.ProcessEnv, encoding: 'utf8', timeout: 120_000 });
  let report: Record<string, any>;
  try {
    report = JSON.parse(run.stdout);
  } catch {
    throw new Error(`rotate-keys ${args.join(' ')}: exit ${run.status}\n${run.stdout}\n${run.stderr}`);
  }
  return { code: run.status, stderr: run.stderr, report };
}

/** Makes a working sftp connection through instance `index`; returns its id. */
async function connection(index: number): Promise<string> {
  const created = await stack.apis[index]!.data('POST', '/connections', { name: `rotation ${randomBytes(4).toString('hex')}`, ...FIXTURES.sftp!.body(place) });
  return created.id as string;
}

const kidOf = async (id: string) => (await db().collection('connections').findOne({ _id: new ObjectId(id) }))!.credentials.kid as string;
const instances = () => db().collection<{ _id: string; active_kid: string }>('instances').find({ live_until: { $gt: new Date() } }).toArray();

test('rotate-keys --new-key, writes in between, --drop-retired (refused while an instance is on the old key), restart: every secret opens', async () => {
  const ids: string[] = [];
  for (let i = 0; i < 12; i++) ids.push(await connection(i % 2));
  const oldKid = await kidOf(ids[0]!);
  const both = await waitFor('both instances report the old key', instances, (list) => list.length === 2 && list.every((i) => i.active_kid === oldKid));

  // 1. A new master.key, everything re-sealed under it.
  const rotated = rotateKeys('--new-key');
  expect([rotated.code, rotated.report.unreadable, rotated.report.changed_meanwhile]).toEqual([0, 0, 0]);
  expect(rotated.report.resealed).toBeGreaterThanOrEqual(12);
  const newKid = rotated.report.active_kid as string;
  expect(newKid).not.toBe(oldKid);

  // Instance 0 takes the new key up within its heartbeat; what it seals from then on is under it.
  const seen = await waitFor('instance 0 on the new key', instances, (list) => list.some((i) => i.active_kid === newKid));
  expect(seen.map((i) => i.active_kid).sort()).toEqual([newKid, oldKid].sort());
  const lagging = seen.find((i) => i.active_kid === oldKid)!._id;
  expect(both.map((i) => i._id)).toContain(lagging);
  ids.push(await connection(0));
  expect(await kidOf(ids.at(-1)!)).toBe(newKid);

  // 2. Dropping the retired key is refused while instance 1, not yet having looked, would seal under it.
  const refused = rotateKeys('--drop-retired');
  expect(refused.code).toBe(6);
  expect(refused.report).toMatchObject({ retired_keys_dropped: false, resealed: 0, instances_on_retired: [{ id: lagging, active_kid: oldKid }] });
  expect(refused.stderr).toContain(`${lagging} on ${oldKid}`);
  expect(existsSync(join(stack.serverEnv.XFER_DATA_DIR!, 'retired-master.keys'))).toBe(true);

  // A write through instance 1: its seal notices master.key, under the new key, and it says so.
  ids.push(await connection(1));
  expect(await kidOf(ids.at(-1)!)).toBe(newKid);
  await waitFor('instance 1 on the new key', instances, (list) => list.length === 2 && list.every((i) => i.active_kid === newKid));

  // 3. Nothing left under the old key; the drop goes ahead.
  const again = rotateKeys();
  expect(again.report).toMatchObject({ resealed: 0, unreadable: 0, changed_meanwhile: 0 });
  const dropped = rotateKeys('--drop-retired');
  expect(dropped.code).toBe(0);
  expect(dropped.report).toMatchObject({ retired_keys_dropped: true, instances_on_retired: [], values_on_retired: 0 });
  expect(existsSync(join(stack.serverEnv.XFER_DATA_DIR!, 'retired-master.keys'))).toBe(false);
  // A write after the drop, then both instances restart with only the new key on disk.
  ids.push(await connection(0));
  for (const index of [0, 1]) {
    await stopProc(stack.servers[index]!);
    await stack.restartServer(index);
  }

  // Every secret opens: each connection's credentials reach the agent and log in to the sftp server.
  for (const id of ids) expect(await kidOf(id)).toBe(newKid);
  await stack.startAgent('rotation-agent');
  for (const [n, id] of ids.entries()) {
    const tested = await stack.apis[n % 2]!.call('POST', `/connections/${id}/test`);
    expect([id, tested.status, tested.body.data?.success]).toEqual([id, 200, true]);
  }
}, 300_000);
