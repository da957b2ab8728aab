import { spawn } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CloseCodes } from '@xfer/shared';
import { AGENT_V8_FLAGS } from '../src/runtime.js';
import { TEST_TOKEN } from './helpers/test-agent.js';
import { TestControlPlane } from './helpers/test-control-plane.js';
import { rmTemp, tempDir } from './helpers/tree.js';

/** The built binary (`npm test` builds first). */
const BIN = fileURLToPath(new URL('../dist/bin/xfer-agent.js', import.meta.url));
const VERSION = (JSON.parse(readFileSync(fileURLToPath(new URL('../package.json', import.meta.url)), 'utf8')) as { version: string }).version;

interface Run {
  pid: number;
  code: Promise<number | null>;
  stdout: () => string;
  stderr: () => string;
  kill: (signal: NodeJS.Signals) => void;
}

function start(args: string[], env: Record<string, string> = {}): Run {
  const child = spawn(process.execPath, [BIN, ...args], {
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => { stdout += d.toString(); });
  child.stderr.on('data', (d: Buffer) => { stderr += d.toString(); });
  return {
    pid: child.pid!,
    code: new Promise((resolve) => child.on('close', (code) => resolve(code))),
    stdout: () => stdout,
    stderr: () => stderr,
    kill: (signal) => child.kill(signal),
  };
}

let server: TestControlPlane;
let dir: string;
beforeEach(async () => {
  server = await TestControlPlane.start();
  dir = tempDir('xfer-bin-');
});
afterEach(async () => {
  await server.close();
  rmTemp(dir);
});

describe('xfer-agent binary', () => {
  test('--help and --version print to stdout and exit 0', async () => {
    const help = start(['--help']);
    expect(await help.code).toBe(0);
    expect(help.stdout()).toContain('xfer-agent start --url URL --token agt_');
    const startHelp = start(['start', '--help']);
    expect(await startHelp.code).toBe(0);
    expect(startHelp.stdout()).toContain('XFER_AGENT_DRAIN_TIMEOUT_MS');
    const version = start(['--version']);
    expect(await version.code).toBe(0);
    expect(version.stdout()).toBe(`${VERSION}\n`);
  });

  test('usage errors exit 2 with a message naming the problem', async () => {
    const unknown = start(['launch']);
    expect(await unknown.code).toBe(2);
    expect(unknown.stderr()).toContain('unknown command "launch"');
    const noUrl = start(['start', '--token', TEST_TOKEN]);
    expect(await noUrl.code).toBe(2);
    expect(noUrl.stderr()).toContain('the control plane URL is required');
    const badJobs = start(['start', '--url', server.baseUrl, '--token', TEST_TOKEN, '--max-jobs', 'many']);
    expect(await badJobs.code).toBe(2);
    expect(badJobs.stderr()).toContain('--max-jobs must be an integer');
    const badRoot = start(['start', '--url', server.baseUrl, '--token', TEST_TOKEN, '--allow-roots', 'data']);
    expect(await badRoot.code).toBe(2);
    expect(badRoot.stderr()).toContain('allowed roots must be absolute directories, not "data"');
    const badHost = start(['start', '--url', server.baseUrl, '--token', TEST_TOKEN], { XFER_AGENT_DENY_HOSTS: '10.0.0.0/8,not a host' });
    expect(await badHost.code).toBe(2);
    expect(badHost.stderr()).toContain('"not a host" is not an IP address, CIDR range, host name or *.domain');
  });

  test('allow_roots and deny_hosts from the config file hold for connection tests', async () => {
    const config = join(dir, 'agent.json');
    const files = join(dir, 'files');
    mkdirSync(files);
    writeFileSync(config, JSON.stringify({ token: TEST_TOKEN, allow_roots: [files], deny_hosts: ['192.0.2.0/24'] }), { mode: 0o600 });
    const run = start(['start', '--config', config, '--url', server.baseUrl]);
    const conn = await server.connection(0);
    await conn.welcome();
    const mounted = (mountPath: string, host = 'localhost') => ({ id: 'c'.repeat(24), name: 'm', type: 'nfs' as const, host, port: 2049, path: '/', options: { mount_path: mountPath }, agent_id: null, credentials: {} });
    conn.send('connection.test', { request_id: 'ok', connection: mounted(files) });
    expect((await conn.next('connection.test.result')).payload).toMatchObject({ request_id: 'ok', success: true });
    conn.send('connection.test', { request_id: 'etc', connection: mounted('/etc') });
    expect((await conn.next('connection.test.result')).payload).toMatchObject({ request_id: 'etc', success: false, message: expect.stringContaining(`the agent may not use the local directory /etc: the agent exposes only ${files}`) });
    conn.send('connection.test', { request_id: 'net', connection: { ...mounted(files, '192.0.2.7'), type: 'sftp', options: {}, credentials: { username: 'u', password: 'p' } } });
    expect((await conn.next('connection.test.result')).payload).toMatchObject({ request_id: 'net', success: false, message: expect.stringContaining('192.0.2.7 is in "192.0.2.0/24" of the agent\'s --deny-hosts') });
    run.kill('SIGTERM');
    expect(await run.code).toBe(0);
  });

  test('a revoked token (close 4401) ends the agent with exit code 3 and a clear log line, never the token', async () => {
    const run = start(['start', '--url', server.baseUrl, '--token', TEST_TOKEN]);
    const conn = await server.connection(0);
    await conn.welcome();
    conn.ws.close(CloseCodes.revoked, 'agent revoked');
    expect(await run.code).toBe(3);
    expect(run.stderr()).toContain('the control plane refused this agent token');
    expect(run.stderr()).toContain('token unknown or revoked: agent revoked (close 4401)');
    expect(run.stderr()).not.toContain(TEST_TOKEN);
    expect(server.connections).toHaveLength(1);
  });

  test('--metrics-port serves /metrics on loopback while the agent runs, and stops with it', async () => {
    const run = start(['start', '--url', server.baseUrl, '--token', TEST_TOKEN, '--metrics-port', '0']);
    const conn = await server.connection(0);
    await conn.welcome();
    let url: string | undefined;
    for (let i = 0; i < 100 && !url; i++) {
      url = /"metrics":"(http:\/\/127\.0\.0\.1:\d+\/metrics)"/.exec(run.stderr())?.[1];
      if (!url) await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(url).toBeDefined();
    const res = await fetch(url!);
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(text).toContain('xfer_agent_jobs_running 0');
    expect(text).not.toContain(TEST_TOKEN);
    run.kill('SIGTERM');
    expect(await run.code).toBe(0);
    await expect(fetch(url!)).rejects.toThrow();
  });

  test('start runs in node started with the agent\'s V8 heap flags (same pid), unless NODE_OPTIONS names the flag (the operator\'s value stands)', async () => {
    // What the process runs as, read where Linux shows it once the agent is connected.
    const commandLine = (run: Run) => readFileSync(`/proc/${run.pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
    const args = ['start', '--url', server.baseUrl, '--token', TEST_TOKEN];
    const run = start(args);
    await (await server.connection(0)).welcome();
    expect(commandLine(run)).toEqual([process.execPath, ...AGENT_V8_FLAGS, BIN, ...args]);
    run.kill('SIGTERM');
    expect(await run.code).toBe(0);

    const own = start(args, { NODE_OPTIONS: '--max_semi_space_size=8' });
    await (await server.connection(1)).welcome();
    expect(commandLine(own)).toEqual([process.execPath, BIN, ...args]);
    own.kill('SIGTERM');
    expect(await own.code).toBe(0);
  });

  test('settings from the environment and a config file; SIGTERM closes with 1000 and exits 0', async () => {
    const config = join(dir, 'agent.json');
    writeFileSync(config, JSON.stringify({ token: TEST_TOKEN, max_jobs: 3 }), { mode: 0o600 });
    const run = start(['start', '--config', config], { XFER_AGENT_URL: server.baseUrl, XFER_LOG_LEVEL: 'debug' });
    const conn = await server.connection(0);
    const hello = await conn.welcome();
    expect(hello.payload.max_jobs).toBe(3);
    expect(hello.payload.version).toBe(VERSION);
    expect(conn.headers.authorization).toBe(`Bearer ${TEST_TOKEN}`);
    // A ping answered proves the session is up before the signal.
    conn.send('ping', { request_id: 'p' });
    await conn.next('pong');
    run.kill('SIGTERM');
    expect((await conn.closed).code).toBe(1000);
    expect(await run.code).toBe(0);
    const lines = run.stderr().trim().split('\n').map((l) => JSON.parse(l) as { msg: string });
    expect(lines.map((l) => l.msg)).toEqual(expect.arrayContaining(['xfer-agent starting', 'connected to the control plane', 'shutting down', 'stopped']));
    expect(run.stderr()).not.toContain(TEST_TOKEN);
  });
});
