import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { CONNECTION_TYPES, type ConnectionType } from '@xfer/shared';
import { startStack, type Stack } from '../src/stack.js';
import { AGENT_ENV, FIXTURES } from './support/connections.js';
import { digestDir, treeDiff, writeTree, type Digests } from './support/trees.js';

/**
 * Every connection type, as source and as destination, through the real binaries and real
 * servers: a mixed tree (nested and unicode names, an empty file, an empty directory, a 50 MiB
 * file) goes around the ring sftp → ftp (explicit TLS) → webdav → blob → s3 → r2 → gcs → … → sftp,
 * one transfer per hop, and comes back byte-identical.
 */
const env = process.env;
const run = randomBytes(4).toString('hex');
/** The ring: the types that have a test server (FIXTURES), in this order. */
const ORDER: ConnectionType[] = ['sftp', 'ftp', 'webdav', 'blob', 's3', 'r2', 'gcs', 'fileshare', 'onedrive', 'smb', 'nfs'];
const ring = ORDER.filter((type) => FIXTURES[type]);
const place = (type: ConnectionType) => `ring-${run}-${type}`;
const sftpDir = join(env.XFER_TEST_SFTP_ROOT!, place('sftp'));
let stack: Stack;
let expected: Digests;
const ids: Partial<Record<ConnectionType, string>> = {};

beforeAll(async () => {
  for (const type of ring) await FIXTURES[type]!.prepare(place(type));
  expected = await writeTree(join(sftpDir, 'tree'), { count: 60, bigBytes: 50 * 1024 * 1024 });
  await FIXTURES.sftp!.prepare(place('sftp')); // hands the tree to the sftp user
  stack = await startStack({ env });
  await stack.startAgent('ring-agent', AGENT_ENV);
  for (const type of ring) {
    ids[type] = (await stack.api.data('POST', '/connections', { name: `ring ${type}`, ...FIXTURES[type]!.body(place(type)) })).id;
  }
}, 180_000);

afterAll(async () => {
  await stack?.stop();
  rmSync(sftpDir, { recursive: true, force: true });
}, 60_000);

test('the ring has every connection type', () => {
  expect([...ring].sort()).toEqual([...CONNECTION_TYPES].sort());
});

const hops = ring.map((from, i) => [from, ring[(i + 1) % ring.length]!] as const);

test.each(hops)('%s → %s', async (from, to) => {
  const job = await stack.api.data('POST', '/transfers', {
    name: `ring ${from} to ${to}`,
    sourceConnectionId: ids[from], sourcePath: '/tree',
    destinationConnectionId: ids[to], destinationPath: to === 'sftp' ? '/back' : '/tree',
  });
  const done = await stack.api.call('POST', `/transfers/${job.id}/execute`);
  expect(done.body).toMatchObject({ success: true, files_transferred: expected.size });
}, 300_000);

test('the tree is back on sftp byte-identical, empty directory included', async () => {
  const back = await digestDir(join(sftpDir, 'back'));
  expect(treeDiff(expected, back.files)).toEqual([]);
  expect(back.dirs).toContain('empty-dir');
});
