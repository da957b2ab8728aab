import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CreateBucketCommand, type S3Client } from '@aws-sdk/client-s3';
import type { ConnectionType } from '@xfer/shared';
import { spawnProc, startStack, stopProc, waitForOutput, type Proc, type Stack } from '../src/stack.js';
import { AGENT_ENV, FIXTURES } from './support/connections.js';
import { sftpAndS3, unfinished, waitFor } from './support/stack-helpers.js';
import { digestBucket, s3Client, treeDiff, writeTree, type Digests } from './support/trees.js';

/**
 * The single-file agent (docs/agent.md, "Single-file binary"): `npm run build:sea -w agent`'s
 * script builds it, and the binary, alone in a directory that is the whole PATH (no `node`
 * anywhere on it) and with an environment of its own, is the only agent of a real control plane:
 * it moves a tree sftp → s3 byte-identical, and tests a connection of every type with a test
 * server (each connector's code loads and works in the bundle). The build needs Node >= 22: under
 * an older node the test builds with the Node 24 of scripts/node-runtime.sh.
 *
 * ssh2's native crypto: the binary embeds `sshcrypto.node` when the node building it has the
 * NODE_MODULE_VERSION `npm ci` built the addon for (its build/config.gypi says which), and then
 * its start line must say `ssh_crypto: "native"` (the sftp transfer runs on it), with no addon
 * file left in its temporary directory; built by another Node (the smoke run on Node 22 after
 * `npm ci` on 24), the build says it left the addon out and the binary runs on ssh2's JavaScript.
 */
const env = process.env;
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const run = randomBytes(4).toString('hex');
const bucket = `agent-sea-${run}`;
const sftpRoot = join(env.XFER_TEST_SFTP_ROOT!, `agent-sea-${run}`);

let work: string;
let bin: string;
let binary: string;
let stack: Stack;
let s3: S3Client;
let agent: Proc;
let ids: { sftp: string; s3: string };
let expected: Digests;
/** What the binary's start line must say: `native` when the building node can use the addon npm ci built. */
let sshCrypto: 'native' | 'javascript';

/** A node that can build a single executable: this one when it is >= 22, else the cached Node 24. */
function buildNode(): string {
  if (Number(process.versions.node.split('.')[0]) >= 22) return process.execPath;
  const res = spawnSync('bash', [join(ROOT, 'scripts/node-runtime.sh'), '24'], { encoding: 'utf8' });
  if (res.status !== 0) throw new Error(`scripts/node-runtime.sh 24 failed (${res.status}): ${res.stderr}`);
  return join(res.stdout.trim(), 'node');
}

/** The agent's environment: nothing of the test's but what the test servers need, and a temporary directory of its own. */
function agentEnv(extra: Record<string, string> = {}): Record<string, string> {
  return { PATH: bin, HOME: join(work, 'home'), TMPDIR: join(work, 'tmp'), ...AGENT_ENV, ...extra };
}

/** The NODE_MODULE_VERSION ssh2's addon was compiled for (node-gyp's config), or null when it was not built. */
function addonModuleVersion(): string | null {
  const config = join(ROOT, 'node_modules/ssh2/lib/protocol/crypto/build/config.gypi');
  try {
    return /"node_module_version": (\d+)/.exec(readFileSync(config, 'utf8'))?.[1] ?? null;
  } catch {
    return null;
  }
}

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'xfer-agent-sea-'));
  bin = join(work, 'bin');
  mkdirSync(bin);
  mkdirSync(join(work, 'home'));
  mkdirSync(join(work, 'tmp'));
  const node = buildNode();
  const modules = spawnSync(node, ['-p', 'process.versions.modules'], { encoding: 'utf8' }).stdout.trim();
  sshCrypto = addonModuleVersion() === modules ? 'native' : 'javascript';
  const build = spawnSync(node, [join(ROOT, 'agent/scripts/build-sea.mjs'), '--out', join(work, 'build')], { encoding: 'utf8', timeout: 240_000 });
  if (build.status !== 0) throw new Error(`build-sea failed (${build.status}):\n${build.stdout}\n${build.stderr}`);
  process.stdout.write(build.stdout);
  // The summary line says what it did with the addons, and it must be what the binary does.
  expect(build.stdout).toContain(sshCrypto === 'native' ? 'sshcrypto.node, cpufeatures.node embedded' : 'sshcrypto.node left out');
  binary = join(bin, 'xfer-agent');
  copyFileSync(join(work, 'build', 'xfer-agent'), binary);
  rmSync(join(work, 'build'), { recursive: true, force: true });

  expected = await writeTree(join(sftpRoot, 'src'), { count: 40, bigBytes: 3 * 1024 * 1024 + 17 });
  spawnSync('chown', ['-R', `${env.XFER_TEST_SFTP_USER}:`, sftpRoot]);
  s3 = s3Client(env);
  await s3.send(new CreateBucketCommand({ Bucket: bucket }));
  stack = await startStack({ env });
  ids = await sftpAndS3(stack, `sea ${run}`, sftpRoot, bucket);
}, 300_000);

afterAll(async () => {
  await stack?.stop();
  rmSync(sftpRoot, { recursive: true, force: true });
  if (work) rmSync(work, { recursive: true, force: true });
}, 60_000);

test('no node is on the PATH the binary runs with', () => {
  const found = spawnSync('/bin/sh', ['-c', 'command -v node'], { env: agentEnv(), encoding: 'utf8' });
  expect({ failed: found.status !== 0, stdout: found.stdout }).toEqual({ failed: true, stdout: '' });
});

test('--version prints the agent package\'s version and --help the usage, with no warning', () => {
  const version = spawnSync(binary, ['--version'], { env: agentEnv(), encoding: 'utf8' });
  const { version: packaged } = JSON.parse(readFileSync(join(ROOT, 'agent/package.json'), 'utf8')) as { version: string };
  expect({ status: version.status, stdout: version.stdout, stderr: version.stderr }).toEqual({ status: 0, stdout: `${packaged}\n`, stderr: '' });
  const help = spawnSync(binary, ['--help'], { env: agentEnv(), encoding: 'utf8' });
  expect({ status: help.status, stderr: help.stderr }).toEqual({ status: 0, stderr: '' });
  expect(help.stdout).toMatch(/^xfer-agent — runs transfer jobs near the data/);
  expect(help.stdout).toContain('xfer-agent start --url URL --token agt_…');
  const usage = spawnSync(binary, ['frobnicate'], { env: agentEnv(), encoding: 'utf8' });
  expect({ status: usage.status, stderr: usage.stderr }).toEqual({ status: 2, stderr: 'xfer-agent: unknown command "frobnicate" (try --help)\n' });
});

test('the binary comes online as the agent of a real control plane', async () => {
  const created = await stack.api.data<{ id: string; token: string }>('POST', '/agents', { name: `sea-${run}` });
  agent = spawnProc(binary, ['start', '--url', stack.url], agentEnv({ XFER_AGENT_TOKEN: created.token }));
  // stack.stop() stops it with the others.
  stack.agents.push(agent);
  await stack.waitForAgent(created.id, 'online');
  await waitForOutput(agent, (out) => out.includes('"msg":"connected to the control plane"'), 30_000);
  const starting = agent.output().split('\n').find((line) => line.includes('"msg":"xfer-agent starting"'));
  expect(JSON.parse(starting ?? '{}')).toMatchObject({ ssh_crypto: sshCrypto });
  const listed = await stack.api.data<{ version: string | null }>('GET', `/agents/${created.id}`);
  expect(listed.version).toBe(JSON.parse(readFileSync(join(ROOT, 'agent/package.json'), 'utf8')).version);
}, 60_000);

test('it moves a tree sftp → s3 byte-identical', async () => {
  const job = await stack.api.data('POST', '/transfers', {
    name: `sea ${run}`, sourceConnectionId: ids.sftp, sourcePath: '/src', destinationConnectionId: ids.s3, destinationPath: '/copy',
  });
  const accepted = await stack.api.call('POST', `/transfers/${job.id}/execute?wait=false`);
  expect(accepted.status).toBe(202);
  const done = await waitFor('the transfer', () => stack.api.data('GET', `/transfers/${job.id}`), (j) => !unfinished(j), 240_000);
  expect(done).toMatchObject({ status: 'completed', error: null, files_total: expected.size, files_transferred: expected.size });
  const copied = await digestBucket(s3, bucket, 'copy');
  expect(treeDiff(expected, copied.files)).toEqual([]);
  expect(copied.markers).toContain('empty-dir');
  // The sftp connection loaded cpu-features too; a failed load would say "did not load" on stderr.
  expect(agent.output()).not.toContain('did not load');
  // Each addon's file was removed as soon as it was loaded.
  expect(readdirSync(join(work, 'tmp'))).toEqual([]);
}, 300_000);

describe.each(Object.keys(FIXTURES) as ConnectionType[])('a %s connection', (type) => {
  test('tests green through the binary', async () => {
    const fixture = FIXTURES[type]!;
    const place = `agent-sea-${run}-${type}`;
    await fixture.prepare(place);
    const { id } = await stack.api.data('POST', '/connections', { name: `sea ${type} ${run}`, ...fixture.body(place) });
    const result = await stack.api.data('POST', `/connections/${id}/test`, undefined, 200);
    expect({ type, ...result }).toMatchObject({ type, success: true });
  }, 60_000);
});

test('SIGTERM stops it cleanly (exit 0)', async () => {
  expect(await stopProc(agent)).toBe(0);
}, 60_000);
