import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The built binary, run as a user would run it. */
const BIN = resolve(dirname(fileURLToPath(import.meta.url)), '../../control-plane/dist/bin/xfer-server.js');

interface Running {
  child: ChildProcess;
  url: string;
  stdout: () => string;
}

/** Starts `xfer-server start --local` and resolves once it prints its URL. */
function startServer(env: Record<string, string>): Promise<Running> {
  const child = spawn(process.execPath, [BIN, 'start', '--local'], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  return new Promise((resolvePromise, reject) => {
    const timer = setTimeout(() => reject(new Error(`no URL printed within 90 s:\n${out}\n${err}`)), 90_000);
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const match = /listening on (http:\/\/\S+\/api\/v1)/.exec(out);
      // --local ends its banner with either the first-start block or the "data reused" line.
      if (match && /Try:|Data reused/.test(out)) {
        clearTimeout(timer);
        resolvePromise({ child, url: match[1]!, stdout: () => out });
      }
    });
    child.on('exit', (code) => reject(new Error(`exited ${code} before listening:\n${out}\n${err}`)));
  });
}

function stop(child: ChildProcess): Promise<number | null> {
  return new Promise((resolvePromise) => {
    child.once('exit', (code) => resolvePromise(code));
    child.kill('SIGTERM');
  });
}

const dataDir = mkdtempSync(join(tmpdir(), 'xfer-e2e-server-'));
// No MONGODB_URI: the binary starts the embedded database itself, as `npm start` does.
const env: Record<string, string> = { XFER_DATA_DIR: dataDir, XFER_PORT: '0', MONGODB_URI: '', XFER_LOG_LEVEL: 'warn' };

afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

test('start --local: embedded database, admin key on first start only, data reused, clean SIGTERM', async () => {
  const first = await startServer(env);
  const key = /API key:\s+(svc_\S+)/.exec(first.stdout())?.[1];
  expect(key).toBeDefined();
  const headers = { authorization: `Bearer ${key}` };
  expect((await fetch(`${first.url}/health`)).status).toBe(200);
  const created = await fetch(`${first.url}/api-keys`, {
    method: 'POST', headers: { ...headers, 'content-type': 'application/json' }, body: JSON.stringify({ name: 'kept', scopes: ['files:read'] }),
  });
  expect(created.status).toBe(201);
  expect(statSync(join(dataDir, 'master.key')).mode & 0o777).toBe(0o600);
  expect(await stop(first.child)).toBe(0);

  const second = await startServer(env);
  try {
    expect(second.stdout()).not.toContain('API key:');
    const list = await fetch(`${second.url}/api-keys`, { headers });
    expect(list.status).toBe(200);
    const names = ((await list.json()) as { data: Array<{ name: string }> }).data.map((k) => k.name);
    expect(names).toContain('kept');
  } finally {
    expect(await stop(second.child)).toBe(0);
  }
}, 240_000);

test('bootstrap --json prints ids and a working key; exit codes 2 and 5', async () => {
  const uri = process.env.MONGODB_URI!;
  const dbEnv = { ...process.env, MONGODB_URI: uri, XFER_DB_NAME: `xfer_e2e_${Date.now()}`, XFER_DATA_DIR: dataDir };
  const run = (args: string[]) => spawnSync(process.execPath, [BIN, ...args], { env: dbEnv, encoding: 'utf8' });
  const ok = run(['bootstrap', '--email', 'ops@example.test', '--password', 'correct-horse-battery', '--plan', 'team', '--json']);
  expect(ok.status).toBe(0);
  const result = JSON.parse(ok.stdout);
  expect(Object.keys(result).sort()).toEqual(['account_id', 'api_key', 'user_id']);
  expect(result.api_key).toMatch(/^svc_/);
  expect(run(['bootstrap', '--email', 'ops@example.test', '--password', 'correct-horse-battery', '--plan', 'team']).status).toBe(5);
  const bad = run(['bootstrap', '--email', 'x@example.test', '--password', 'correct-horse-battery', '--plan', 'gold']);
  expect(bad.status).toBe(2);
  expect(bad.stderr).toContain('--plan must be one of free, team, enterprise');
  expect(run(['bootstrap', '--help']).stdout).toContain('--plan');
  expect(run(['nonsense']).status).toBe(2);
}, 60_000);

test('npm start (scripts/start-local.mjs): the local stack brings its own agent online; Ctrl-C stops both', async () => {
  const stackDir = mkdtempSync(join(tmpdir(), 'xfer-e2e-start-'));
  const filesDir = mkdtempSync(join(tmpdir(), 'xfer-e2e-files-'));
  const script = resolve(dirname(fileURLToPath(import.meta.url)), '../../scripts/start-local.mjs');
  const child = spawn(process.execPath, [script], {
    env: { ...process.env, XFER_DATA_DIR: stackDir, XFER_LOCAL_FILES: filesDir, XFER_PORT: '0', MONGODB_URI: '', XFER_LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((res) => child.once('exit', (code) => res(code)));
  try {
    const deadline = Date.now() + 120_000;
    while (!/local agent started/.test(out)) {
      if (Date.now() > deadline || child.exitCode !== null) throw new Error(`no local agent:\n${out}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    const url = /listening on (http:\/\/\S+\/api\/v1)/.exec(out)![1]!;
    const key = /API key:\s+(svc_\S+)/.exec(out)![1]!;
    expect(statSync(join(stackDir, 'local-agent.token')).mode & 0o777).toBe(0o600);
    let agents: Array<{ name: string; status: string; connector_types: string[] }> = [];
    while (Date.now() < deadline && agents[0]?.status !== 'online') {
      agents = ((await (await fetch(`${url}/agents`, { headers: { authorization: `Bearer ${key}` } })).json()) as { data: typeof agents }).data;
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(agents).toEqual([expect.objectContaining({ name: 'local', status: 'online', connector_types: expect.arrayContaining(['sftp', 's3']) })]);
    // The local agent exposes the files folder only: never the data dir beside it (master key, database).
    expect(out).toContain(`it may expose ${filesDir} only`);
    const pid = /local agent started \(pid (\d+)/.exec(out)![1]!;
    const args = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    expect(args.slice(args.indexOf('--allow-roots'), args.indexOf('--allow-roots') + 2)).toEqual(['--allow-roots', filesDir]);
  } finally {
    child.kill('SIGINT');
    expect(await exited).toBe(0);
    rmSync(stackDir, { recursive: true, force: true });
    rmSync(filesDir, { recursive: true, force: true });
  }
}, 180_000);

test('npm start refuses a files folder that overlaps its data dir or the repository', () => {
  const script = resolve(dirname(fileURLToPath(import.meta.url)), '../../scripts/start-local.mjs');
  const stackDir = mkdtempSync(join(tmpdir(), 'xfer-e2e-start-'));
  try {
    for (const [files, what] of [[join(stackDir, 'files'), 'the data directory'], [stackDir, 'the data directory'], [resolve(dirname(script), '..'), 'the repository']] as const) {
      const result = spawnSync(process.execPath, [script], { env: { ...process.env, XFER_DATA_DIR: stackDir, XFER_LOCAL_FILES: files, XFER_PORT: '0', MONGODB_URI: '' }, encoding: 'utf8', timeout: 30_000 });
      expect([result.status, result.stderr]).toEqual([2, expect.stringContaining(`XFER_LOCAL_FILES=${files} overlaps ${what}`)]);
    }
  } finally {
    rmSync(stackDir, { recursive: true, force: true });
  }
});
