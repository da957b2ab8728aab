import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * README.md "Start here", tried as a newcomer would: a fresh `git clone` of this repository, then
 * the block's commands word for word with the Node.js running this test (CI: Node 24) — `npm ci`
 * must install quietly (no warning: install scripts reviewed in allowScripts, engines met) and
 * `npm start` must bring up the local stack with its agent online, answering the block after it
 * (`curl -H "Authorization: Bearer $KEY" $API/agents`), and stop cleanly on Ctrl-C. `npm test`
 * is the run this test is part of: it is checked to be in the block, not run again.
 * The clone is of the committed HEAD: uncommitted changes are not tried.
 */
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const README = readFileSync(join(ROOT, 'README.md'), 'utf8');

/** The commands of the first ```sh block after `heading`, comments dropped. */
function blockCommands(heading: string): string[] {
  const at = README.indexOf(`\n${heading}\n`);
  if (at < 0) throw new Error(`README.md has no "${heading}" section`);
  const m = /```sh\n([\s\S]*?)\n```/.exec(README.slice(at));
  if (!m) throw new Error(`README.md "${heading}" has no \`\`\`sh block`);
  return m[1]!.split('\n').map((line) => line.replace(/\s+#.*$/, '').trim()).filter((line) => line !== '' && !line.startsWith('#'));
}

const work = mkdtempSync(join(tmpdir(), 'xfer-readme-start-'));
const clone = join(work, 'xfer');
const files = join(work, 'files');
// The node running the tests first on the PATH: npm (a node script) and everything it starts use it.
const env = {
  ...process.env,
  PATH: `${dirname(process.execPath)}:${process.env.PATH}`,
  // A free port rather than 8080 (other tests run beside this one), the embedded database as on a
  // newcomer's machine (no MONGODB_URI), the local agent's folder inside this test's directory.
  XFER_PORT: '0', MONGODB_URI: '', XFER_LOCAL_FILES: files, XFER_LOG_LEVEL: 'warn',
};

afterAll(() => rmSync(work, { recursive: true, force: true }));

test('the README start block is npm ci, npm start, npm test', () => {
  expect(blockCommands('## Start here')).toEqual(['npm ci', 'npm start', 'npm test']);
});

test('from a fresh clone: npm ci installs without a warning, npm start serves with its agent online, Ctrl-C stops it', async () => {
  const cloned = spawnSync('git', ['clone', '-q', ROOT, clone], { encoding: 'utf8' });
  expect({ status: cloned.status, stderr: cloned.stderr }).toEqual({ status: 0, stderr: '' });
  const [install, start] = blockCommands('## Start here');

  const ci = spawnSync('bash', ['-c', install!], { cwd: clone, env, encoding: 'utf8', timeout: 600_000 });
  expect({ status: ci.status, stderr: ci.stderr.slice(-2000) }).toMatchObject({ status: 0 });
  expect(ci.stderr.split('\n').filter((line) => /^npm (warn|error)/i.test(line))).toEqual([]);

  // Its own process group, as a terminal runs a command: Ctrl-C reaches npm and all it started.
  const child = spawn('bash', ['-c', start!], { cwd: clone, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((res) => child.once('exit', (code) => res(code)));
  try {
    const deadline = Date.now() + 420_000;
    while (!/local agent started/.test(out)) {
      if (Date.now() > deadline || child.exitCode !== null) throw new Error(`npm start brought up no local agent:\n${out.slice(-4000)}`);
      await new Promise((r) => setTimeout(r, 250));
    }
    const api = /listening on (http:\/\/\S+\/api\/v1)/.exec(out)![1]!;
    const key = /API key:\s+(svc_\S+)/.exec(out)?.[1];
    expect(key).toBeDefined();
    // The next block's first command, word for word, with KEY and API set as it says.
    const agentsLine = README.split('\n').find((line) => line.startsWith('curl -H "Authorization: Bearer $KEY" $API/agents'));
    expect(agentsLine).toBeDefined();
    let agents: Array<{ name: string; status: string }> = [];
    while (Date.now() < deadline && agents[0]?.status !== 'online') {
      const curl = spawnSync('bash', ['-c', agentsLine!.replace(/\s+#.*$/, '')], { env: { ...env, KEY: key!, API: api }, encoding: 'utf8' });
      expect(curl.status).toBe(0);
      agents = (JSON.parse(curl.stdout) as { data: typeof agents }).data;
      if (agents[0]?.status !== 'online') await new Promise((r) => setTimeout(r, 500));
    }
    expect(agents).toEqual([expect.objectContaining({ name: 'local', status: 'online' })]);
  } finally {
    process.kill(-child.pid!, 'SIGINT');
  }
  // npm reports the child's Ctrl-C as its own exit; what matters is that everything stopped.
  await exited;
  expect(out).not.toMatch(/local agent exited|unhandled|Error:/);
  // Nothing it started outlives it (the embedded database's command line names the clone's data dir).
  const running = () => spawnSync('pgrep', ['-f', clone], { encoding: 'utf8' }).stdout.trim();
  for (const until = Date.now() + 30_000; running() !== '' && Date.now() < until;) await new Promise((r) => setTimeout(r, 250));
  expect(running()).toBe('');
}, 900_000);
