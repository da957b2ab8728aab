import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CreateBucketCommand, type S3Client } from '@aws-sdk/client-s3';
import { Api, spawnProc, stopProc, waitForOutput, type Proc } from '../src/stack.js';
import { cliEnv, jsonOf, type CliRun } from './support/cli.js';
import { sftpAndS3 } from './support/stack-helpers.js';
import { digestBucket, s3Client, treeDiff, writeTree, type Digests } from './support/trees.js';

/**
 * The packages as an operator installs them (docs/operations.md, "Installing from the packages"):
 * `npm run pack`'s tarballs, installed with `npm i -g` into a prefix of their own, the internal
 * libraries coming from the tarballs and never from a registry, third-party packages from the npm
 * cache (or the registry). Then the installed commands alone, run from a directory outside the
 * repository with a PATH holding the prefix's bin and a `node`, nothing else: `xfer-server
 * bootstrap` and `start` on the test database, `xfer agents create`, `xfer-agent start`, and
 * `xfer transfers run` copying a tree sftp → s3 byte-identical.
 */
const env = process.env;
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
/** The workspace packages `npm run pack` makes tarballs of, by directory. */
const PACKED = ['shared', 'storage', 'cli', 'agent', 'control-plane'];
/** The ones installed: the three commands. */
const APPS = { cli: 'xfer', agent: 'xfer-agent', 'control-plane': 'xfer-server' } as const;
const run = randomBytes(4).toString('hex');
const bucket = `install-packages-${run}`;
const sftpRoot = join(env.XFER_TEST_SFTP_ROOT!, `install-packages-${run}`);

let work: string;
let prefix: string;
let tarballs: Map<string, string>;
let pathEnv: string;
let server: Proc | undefined;
let agent: Proc | undefined;
let api: Api;
let expected: Digests;
let s3: S3Client;

const readJson = (path: string) => JSON.parse(readFileSync(path, 'utf8')) as Record<string, any>;
const manifestOf = (dir: string) => readJson(join(ROOT, dir, 'package.json'));

/** A finished command that must have exited 0; its output otherwise, so a failure says why. */
function ok(what: string, res: SpawnSyncReturns<string>): string {
  if (res.error) throw res.error;
  if (res.status !== 0) throw new Error(`${what} exited ${res.status ?? res.signal}:\n${res.stdout}\n${res.stderr}`);
  return res.stdout;
}

/** The test's environment for npm, without the npm_* variables of an `npm test` around it. */
const npmEnv = () => Object.fromEntries(Object.entries(env).filter(([k]) => !k.toLowerCase().startsWith('npm_')));

/** One of the installed commands, found on the restricted PATH, run in `work` (outside the repository). */
function installed(command: string, args: string[], extra: Record<string, string> = {}): CliRun {
  const res = spawnSync(command, args, {
    cwd: work, env: cliEnv(join(work, 'home'), { PATH: pathEnv, ...extra }), encoding: 'buffer', timeout: 240_000, maxBuffer: 64 * 1024 * 1024,
  });
  if (res.error) throw res.error;
  return { status: res.status, signal: res.signal, stdout: res.stdout.toString('utf8'), stdoutBytes: res.stdout, stderr: res.stderr.toString('utf8') };
}

/** A long-running installed command in `work` (`env -C`: spawnProc takes no working directory). */
const startInstalled = (command: string, args: string[], extra: Record<string, string>): Proc =>
  spawnProc('/usr/bin/env', ['-C', work, command, ...args], { PATH: pathEnv, HOME: join(work, 'home'), ...extra });

/** Every package installed under `dir` (a node_modules), nested ones included: name → manifest. */
function installedPackages(dir: string, into: Array<{ name: string; manifest: Record<string, any> }> = []) {
  if (!existsSync(dir)) return into;
  for (const entry of readdirSync(dir)) {
    if (entry.startsWith('.')) continue;
    const dirs = entry.startsWith('@') ? readdirSync(join(dir, entry)).map((e) => join(dir, entry, e)) : [join(dir, entry)];
    for (const pkgDir of dirs) {
      if (!existsSync(join(pkgDir, 'package.json'))) continue;
      const manifest = readJson(join(pkgDir, 'package.json'));
      into.push({ name: manifest.name as string, manifest });
      installedPackages(join(pkgDir, 'node_modules'), into);
    }
  }
  return into;
}

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'xfer-install-packages-'));
  mkdirSync(join(work, 'home'));
  // PATH: the prefix's bin, then a directory holding only a `node` (the one running this test).
  prefix = join(work, 'prefix');
  const nodeDir = join(work, 'node-bin');
  mkdirSync(nodeDir);
  symlinkSync(process.execPath, join(nodeDir, 'node'));
  pathEnv = `${join(prefix, 'bin')}:${nodeDir}`;

  const out = join(work, 'packages');
  ok('npm run pack', spawnSync(process.execPath, [join(ROOT, 'scripts/pack.mjs'), '--out', out], { cwd: ROOT, env: npmEnv(), encoding: 'utf8', timeout: 300_000 }));
  tarballs = new Map(PACKED.map((dir) => {
    const { name, version } = manifestOf(dir);
    return [dir, join(out, `${(name as string).slice(1).replace('/', '-')}-${version}.tgz`)];
  }));
  // As docs/operations.md says to. The @xfer scope's registry is a closed port: fetching an
  // internal package would fail the install.
  ok('npm i -g', spawnSync('npm', [
    'install', '--global', '--prefix', prefix, '--ignore-scripts', '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error',
    '--@xfer:registry=http://127.0.0.1:9/', ...Object.keys(APPS).map((dir) => tarballs.get(dir)!),
  ], { cwd: work, env: npmEnv(), encoding: 'utf8', timeout: 480_000 }));

  expected = await writeTree(join(sftpRoot, 'src'), { count: 12, bigBytes: 2 * 1024 * 1024 + 7 });
  spawnSync('chown', ['-R', `${env.XFER_TEST_SFTP_USER}:`, sftpRoot]);
  s3 = s3Client(env);
  await s3.send(new CreateBucketCommand({ Bucket: bucket }));
}, 900_000);

afterAll(async () => {
  if (agent) await stopProc(agent);
  if (server) await stopProc(server);
  rmSync(sftpRoot, { recursive: true, force: true });
  if (work) rmSync(work, { recursive: true, force: true });
}, 60_000);

test('the tarballs hold what runs: built JavaScript (and declarations of the libraries), the manifest, the units; no tests, sources or maps', () => {
  for (const dir of PACKED) {
    const entries = ok(`tar tzf ${dir}`, spawnSync('tar', ['-tzf', tarballs.get(dir)!], { encoding: 'utf8' })).split('\n').filter(Boolean);
    const unexpected = entries.filter((e) => !(
      /^package\/(node_modules\/@xfer\/[a-z-]+\/)?(package\.json|dist\/.+\.(js|d\.ts))$/.test(e) ||
      (dir === 'cli' && e === 'package/oclif.manifest.json') ||
      e.startsWith('package/systemd/')));
    expect({ dir, unexpected }).toEqual({ dir, unexpected: [] });
    expect({ dir, tests: entries.filter((e) => /\.test\.|\/test\/|test-server/.test(e)) }).toEqual({ dir, tests: [] });
    // The units of the repository's <package>/systemd/, all of them (docs/operations.md).
    const units = existsSync(join(ROOT, dir, 'systemd')) ? readdirSync(join(ROOT, dir, 'systemd')).map((f) => `package/systemd/${f}`) : [];
    expect({ dir, units: entries.filter((e) => e.startsWith('package/systemd/')).sort() }).toEqual({ dir, units: units.sort() });
  }
});

test('each package bundles the internal libraries it needs and lists no devDependencies', () => {
  const bundled = (dir: string) => ok('tar', spawnSync('tar', ['-tzf', tarballs.get(dir)!], { encoding: 'utf8' }))
    .split('\n').filter((e) => /^package\/node_modules\/@xfer\/[a-z-]+\/package\.json$/.test(e)).map((e) => e.split('/')[3]).sort();
  expect(Object.fromEntries(PACKED.map((dir) => [dir, bundled(dir)]))).toEqual({
    shared: [], storage: ['shared'], cli: ['shared'], agent: ['shared', 'storage'], 'control-plane': ['shared', 'storage'],
  });
  for (const dir of Object.keys(APPS)) {
    const pkg = readJson(join(prefix, 'lib/node_modules', manifestOf(dir).name, 'package.json'));
    expect({ dir, devDependencies: pkg.devDependencies, scripts: pkg.scripts }).toEqual({ dir, devDependencies: undefined, scripts: undefined });
  }
});

test('npm i -g installs the three commands and no devDependency', () => {
  expect(readdirSync(join(prefix, 'bin')).sort()).toEqual(Object.values(APPS).sort());
  const packages = installedPackages(join(prefix, 'lib/node_modules'));
  const names = new Set(packages.map((p) => p.name));
  expect(['jest', 'typescript', 'ts-jest', 'fast-check', 'dependency-cruiser'].filter((n) => names.has(n))).toEqual([]);
  // A devDependency of the repository may be there only as some installed package's own dependency.
  const dev = new Set(['.', ...PACKED].flatMap((dir) => Object.keys(manifestOf(dir).devDependencies ?? {})));
  const wanted = new Set(packages.flatMap(({ manifest: m }) => [m.dependencies, m.optionalDependencies, m.peerDependencies].flatMap((d) => Object.keys(d ?? {}))));
  expect([...names].filter((n) => dev.has(n) && !wanted.has(n))).toEqual([]);
}, 60_000);

test('the installed commands run from the prefix alone, outside the repository', () => {
  for (const command of Object.values(APPS)) {
    const found = spawnSync('/bin/sh', ['-c', `command -v ${command}`], { cwd: work, env: { PATH: pathEnv }, encoding: 'utf8' });
    expect({ command, path: found.stdout.trim() }).toEqual({ command, path: join(prefix, 'bin', command) });
  }
  const version = (dir: keyof typeof APPS) => manifestOf(dir).version as string;
  const cli = installed('xfer', ['--version']);
  expect({ status: cli.status, stdout: cli.stdout }).toEqual({ status: 0, stdout: expect.stringContaining(`@xfer/cli/${version('cli')}`) });
  const agentVersion = installed('xfer-agent', ['--version']);
  expect({ status: agentVersion.status, stdout: agentVersion.stdout }).toEqual({ status: 0, stdout: `${version('agent')}\n` });
  const help = installed('xfer-server', ['--help']);
  expect({ status: help.status, stdout: help.stdout }).toEqual({ status: 0, stdout: expect.stringMatching(/^xfer-server — the xfer control plane/) });
}, 120_000);

test('installed server, agent and CLI copy a tree sftp → s3 byte-identical', async () => {
  const serverEnv = {
    MONGODB_URI: env.MONGODB_URI!, XFER_DB_NAME: `xfer_e2e_install_${run}`, XFER_DATA_DIR: join(work, 'data'),
    XFER_MASTER_KEY: randomBytes(32).toString('base64'), XFER_PORT: '0', XFER_LOG_LEVEL: 'warn',
  };
  const boot = installed('xfer-server', ['bootstrap', '--email', `install-${run}@example.test`, '--password', randomBytes(12).toString('hex'), '--plan', 'enterprise', '--json'], serverEnv);
  const { api_key: apiKey } = jsonOf<{ api_key: string }>(boot);

  server = startInstalled('xfer-server', ['start'], serverEnv);
  await waitForOutput(server, (o) => /listening on http:\/\/\S+\/api\/v1/.test(o), 120_000);
  const url = /listening on (http:\/\/\S+\/api\/v1)/.exec(server.output())![1]!;
  api = new Api(url, apiKey);
  const cli = { XFER_URL: url, XFER_API_KEY: apiKey };

  // The API's documentation pages are served from the installed package's files.
  const docs = await fetch(`${url}/docs/static/index.html`);
  expect({ status: docs.status, type: docs.headers.get('content-type') }).toEqual({ status: 200, type: expect.stringContaining('text/html') });

  const created = jsonOf<{ id: string; token: string }>(installed('xfer', ['agents', 'create', '--name', `installed-${run}`, '--json'], cli));
  agent = startInstalled('xfer-agent', ['start', '--url', url], { XFER_AGENT_TOKEN: created.token, XFER_LOG_LEVEL: 'info' });
  await waitForOutput(agent, (o) => o.includes('"msg":"connected to the control plane"'), 120_000);
  expect((await api.data<{ version: string | null }>('GET', `/agents/${created.id}`)).version).toBe(manifestOf('agent').version);

  const ids = await sftpAndS3({ api }, `installed ${run}`, sftpRoot, bucket);
  const transfer = installed('xfer', ['transfers', 'run', '--name', `installed ${run}`, '--source', ids.sftp, '--source-path', '/src', '--dest', ids.s3, '--dest-path', '/copy', '--json'], cli);
  expect(jsonOf(transfer)).toMatchObject({ status: 'completed', files_total: expected.size, files_transferred: expected.size });
  const copied = await digestBucket(s3, bucket, 'copy');
  expect(treeDiff(expected, copied.files)).toEqual([]);

  // SIGTERM: both stop cleanly.
  expect(await stopProc(agent)).toBe(0);
  expect(await stopProc(server)).toBe(0);
}, 600_000);
