import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runningCommand } from '../src/service/install-service.js';
import { renderAgentUnit } from '../src/service/unit.js';
import { rmTemp, tempDir } from './helpers/tree.js';

/** The built binary (`npm test` builds first). */
const BIN = fileURLToPath(new URL('../dist/bin/xfer-agent.js', import.meta.url));
const SHIPPED_AGENT_UNIT = fileURLToPath(new URL('../systemd/xfer-agent.service', import.meta.url));
const SHIPPED_SERVER_UNIT = fileURLToPath(new URL('../../control-plane/systemd/xfer-server.service', import.meta.url));
const SYSTEMD_ANALYZE = '/usr/bin/systemd-analyze';
const TOKEN = 'agt_Zm9vYmFyYmF6cXV4LXRlc3QtdG9rZW4tMDEyMzQ1Njc4OWFi';
const URL_ = 'https://xfer.example.com/api/v1';

interface Result {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `xfer-agent install-service ARGS` with `stdin` piped in, under `umask` (a shell sets it). */
function install(args: string[], opts: { stdin?: string; env?: Record<string, string>; umask?: string } = {}): Result {
  const quoted = [process.execPath, BIN, 'install-service', ...args].map((a) => `'${a.replace(/'/g, `'\\''`)}'`).join(' ');
  const run = spawnSync('/bin/sh', ['-c', `umask ${opts.umask ?? '022'} && exec ${quoted}`], {
    input: opts.stdin ?? '', env: { PATH: process.env.PATH ?? '', ...opts.env }, encoding: 'utf8',
  });
  return { code: run.status, stdout: run.stdout, stderr: run.stderr };
}

/** `systemd-analyze verify` of unit files: exit 0 and nothing on stderr (it only warns about unknown keys and bad values). */
function verify(...units: string[]): Result {
  if (!existsSync(SYSTEMD_ANALYZE)) throw new Error(`${SYSTEMD_ANALYZE} is missing: install the "systemd" package (Debian) to check the units`);
  const run = spawnSync(SYSTEMD_ANALYZE, ['verify', '--man=no', '--generators=no', ...units], { encoding: 'utf8' });
  return { code: run.status, stdout: run.stdout, stderr: run.stderr };
}

let dir: string;
let unitDir: string;
let envDir: string;
/** An executable standing in for the installed xfer-agent (verify checks ExecStart exists). */
let exe: string;
beforeEach(() => {
  dir = tempDir('xfer-install-service-');
  unitDir = join(dir, 'systemd');
  envDir = join(dir, 'etc', 'xfer');
  mkdirSync(unitDir);
  exe = join(dir, 'xfer-agent');
  writeFileSync(exe, '#!/bin/sh\nexit 0\n');
  chmodSync(exe, 0o755);
});
afterEach(() => rmTemp(dir));

const dirs = () => ['--unit-dir', unitDir, '--env-dir', envDir, '--bin', exe];
const mode = (path: string) => statSync(path).mode & 0o777;

describe('xfer-agent install-service', () => {
  test('writes the unit with the binary and the environment file with the URL and the token from stdin, at 0600', () => {
    const run = install(['--url', URL_, '--token-stdin', ...dirs()], { stdin: `${TOKEN}\n` });
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    const unitFile = join(unitDir, 'xfer-agent.service');
    const envFile = join(envDir, 'xfer-agent.env');
    expect(run.stdout).toContain(`Wrote ${unitFile}`);
    expect(run.stdout).toContain('systemctl daemon-reload\n  systemctl enable --now xfer-agent');
    expect(run.stdout).not.toContain(TOKEN);

    const unit = readFileSync(unitFile, 'utf8');
    expect(unit).toContain(`\nExecStart=${exe} start\n`);
    expect(unit).toContain(`\nEnvironmentFile=${envFile}\n`);
    expect(unit).toContain('\nDynamicUser=yes\n');
    expect(unit).toContain('\nStateDirectory=xfer-agent\n');
    expect(unit).toContain('\nEnvironment=XFER_AGENT_STATE_DIR=%S/xfer-agent\n');
    expect(unit).toContain('\nRestartPreventExitStatus=2 3\n');
    expect(unit).not.toContain('ConfigurationDirectory='); // the env dir is not under /etc
    expect(unit).not.toContain(TOKEN);
    expect(mode(unitFile)).toBe(0o644);

    expect(readFileSync(envFile, 'utf8').split('\n').filter((l) => l && !l.startsWith('#'))).toEqual([
      `XFER_AGENT_URL=${URL_}`, `XFER_AGENT_TOKEN=${TOKEN}`,
    ]);
    expect(mode(envFile)).toBe(0o600);
    expect(mode(envDir)).toBe(0o700);
    expect(readdirSync(envDir)).toEqual(['xfer-agent.env']); // no temporary file left
    expect(readdirSync(unitDir)).toEqual(['xfer-agent.service']);
  });

  test('the token may come from XFER_AGENT_TOKEN; several URLs, a name, a user and allowed roots', () => {
    const data = join(dir, 'data');
    const data2 = join(dir, 'data2');
    mkdirSync(data);
    mkdirSync(data2);
    const run = install(
      ['--url', URL_, '--url', 'https://cp-2.example.com/api/v1', '--name', 'xfer-agent-nfs.service', '--user', 'xferagent', '--allow-roots', `${data}/,${data},${data2}`, ...dirs()],
      { env: { XFER_AGENT_TOKEN: TOKEN } },
    );
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    expect(run.stdout).toContain('The user xferagent must exist');
    const unit = readFileSync(join(unitDir, 'xfer-agent-nfs.service'), 'utf8');
    expect(unit).toContain('\nUser=xferagent\n');
    expect(unit).not.toContain('DynamicUser');
    expect(unit).toContain(`\nReadWritePaths=${data} ${data2}\n`); // the same root written twice: once
    expect(unit).toContain(`\nRequiresMountsFor=${data} ${data2}\n`);
    expect(unit).toContain('\nStateDirectory=xfer-agent-nfs\n');
    expect(unit).toContain('\nProtectHome=yes\n');
    const env = readFileSync(join(envDir, 'xfer-agent-nfs.env'), 'utf8');
    expect(env).toContain(`\nXFER_AGENT_URL=${URL_},https://cp-2.example.com/api/v1\n`);
    expect(env).toContain(`\nXFER_AGENT_TOKEN=${TOKEN}\n`);
    expect(env).toContain(`\nXFER_AGENT_ALLOW_ROOTS=${data},${data2}\n`);
  });

  test('the files keep their modes whatever the umask', () => {
    expect(install(['--url', URL_, ...dirs()], { env: { XFER_AGENT_TOKEN: TOKEN }, umask: '000' }).code).toBe(0);
    expect(mode(join(envDir, 'xfer-agent.env'))).toBe(0o600);
    expect(mode(join(unitDir, 'xfer-agent.service'))).toBe(0o644);
    expect(install(['--url', URL_, '--name', 'other', ...dirs()], { env: { XFER_AGENT_TOKEN: TOKEN }, umask: '077' }).code).toBe(0);
    expect(mode(join(envDir, 'other.env'))).toBe(0o600);
    expect(mode(join(unitDir, 'other.service'))).toBe(0o644);
  });

  test('an existing unit or environment file is replaced only with --force', () => {
    expect(install(['--url', URL_, ...dirs()], { env: { XFER_AGENT_TOKEN: TOKEN } }).code).toBe(0);
    const envFile = join(envDir, 'xfer-agent.env');
    const before = readFileSync(envFile, 'utf8');
    const other = 'agt_another-token-0123456789abcdefghij';

    const again = install(['--url', 'https://new.example.com', ...dirs()], { env: { XFER_AGENT_TOKEN: other } });
    expect(again.code).toBe(2);
    expect(again.stderr).toBe(`xfer-agent: ${join(unitDir, 'xfer-agent.service')} exists: pass --force to replace it\n`);
    expect(readFileSync(envFile, 'utf8')).toBe(before);

    // Only the environment file left (the unit removed by hand): still refused, still untouched.
    rmTemp(join(unitDir, 'xfer-agent.service'));
    const envOnly = install(['--url', 'https://new.example.com', ...dirs()], { env: { XFER_AGENT_TOKEN: other } });
    expect(envOnly.code).toBe(2);
    expect(envOnly.stderr).toContain(`${envFile} exists: pass --force`);
    expect(existsSync(join(unitDir, 'xfer-agent.service'))).toBe(false);

    const forced = install(['--url', 'https://new.example.com', '--force', ...dirs()], { env: { XFER_AGENT_TOKEN: other } });
    expect(forced.code).toBe(0);
    expect(readFileSync(envFile, 'utf8')).toContain(`\nXFER_AGENT_TOKEN=${other}\n`);
    expect(readFileSync(envFile, 'utf8')).toContain('\nXFER_AGENT_URL=https://new.example.com\n');
    expect(mode(envFile)).toBe(0o600);
    expect(readdirSync(envDir)).toEqual(['xfer-agent.env']);
  });

  test('bad input is refused with a message naming it, and nothing is written', () => {
    const notExecutable = join(dir, 'plain');
    writeFileSync(notExecutable, '');
    const cases: [string[], Record<string, string>, string][] = [
      [['--url', URL_, '--token', TOKEN, ...dirs()], {}, 'install-service takes no --token (a flag shows in ps)'],
      [['--url', URL_, ...dirs()], {}, 'no token: pipe it with --token-stdin, or set XFER_AGENT_TOKEN'],
      [['--url', URL_, '--token-stdin', ...dirs()], {}, 'no token on stdin'],
      [['--url', URL_, ...dirs()], { XFER_AGENT_TOKEN: 'secret' }, 'the agent token must look like agt_'],
      [['--url', URL_, ...dirs()], { XFER_AGENT_TOKEN: 'agt_"quoted$token"' }, 'the token must be agt_ followed by letters, digits'],
      [[...dirs()], { XFER_AGENT_TOKEN: TOKEN }, '--url is required'],
      [['--url', 'ftp://xfer.example.com', ...dirs()], { XFER_AGENT_TOKEN: TOKEN }, 'the control plane URL must be http(s):// or ws(s)://, not ftp://'],
      [['--url', 'https://user:pw@xfer.example.com', ...dirs()], { XFER_AGENT_TOKEN: TOKEN }, 'the control plane URL must not carry credentials'],
      [['--url', 'not a url', ...dirs()], { XFER_AGENT_TOKEN: TOKEN }, 'the control plane URL is not a URL'],
      [['--url', 'https://xfer.example.com/a$b', ...dirs()], { XFER_AGENT_TOKEN: TOKEN }, '--url must not hold spaces, quotes'],
      [['--url', URL_, '--name', '../evil', ...dirs()], { XFER_AGENT_TOKEN: TOKEN }, '--name must be a unit name'],
      [['--url', URL_, '--name', 'agent@1', ...dirs()], { XFER_AGENT_TOKEN: TOKEN }, '--name must be a unit name'],
      [['--url', URL_, '--user', 'root;rm', ...dirs()], { XFER_AGENT_TOKEN: TOKEN }, '--user must be a user name'],
      [['--url', URL_, '--allow-roots', dir, ...dirs()], { XFER_AGENT_TOKEN: TOKEN }, '--allow-roots needs --user'],
      [['--url', URL_, '--user', 'x', '--allow-roots', 'data', ...dirs()], { XFER_AGENT_TOKEN: TOKEN }, '--allow-roots: "data" is not an absolute path'],
      [['--url', URL_, '--user', 'x', '--allow-roots', join(dir, 'missing'), ...dirs()], { XFER_AGENT_TOKEN: TOKEN }, 'does not exist (systemd would refuse to start the service)'],
      [['--url', URL_, '--user', 'x', '--allow-roots', '/srv/my data', ...dirs()], { XFER_AGENT_TOKEN: TOKEN }, 'has characters a unit file would need escaped'],
      [['--url', URL_, '--unit-dir', unitDir, '--env-dir', envDir, '--bin', 'xfer-agent'], { XFER_AGENT_TOKEN: TOKEN }, '--bin must be an absolute path'],
      [['--url', URL_, '--unit-dir', unitDir, '--env-dir', envDir, '--bin', notExecutable], { XFER_AGENT_TOKEN: TOKEN }, `${notExecutable} is not an executable file`],
      [['--url', URL_, '--unit-dir', unitDir, '--env-dir', envDir, '--bin', '/home/me/bin/xfer-agent'], { XFER_AGENT_TOKEN: TOKEN }, 'is under /home, which the unit\'s ProtectHome= hides'],
      [['--url', URL_, '--unit-dir', join(dir, 'nope'), '--env-dir', envDir, '--bin', exe], { XFER_AGENT_TOKEN: TOKEN }, 'is not a directory'],
      [['--url', URL_, '--enable', ...dirs()], { XFER_AGENT_TOKEN: TOKEN }, "Unknown option '--enable'"],
    ];
    for (const [args, env, message] of cases) {
      const run = install(args, { env });
      expect({ args, code: run.code, stderr: run.stderr }).toEqual({ args, code: 2, stderr: expect.stringContaining(message) });
      expect(run.stderr).not.toContain(TOKEN);
    }
    expect(readdirSync(unitDir)).toEqual([]);
    expect(existsSync(envDir)).toBe(false);
  });

  test('the shipped unit is what install-service renders for /usr/local/bin/xfer-agent', () => {
    const run = install(['--print', '--bin', '/usr/local/bin/xfer-agent']);
    expect(run.code).toBe(0);
    // On a difference: node agent/dist/bin/xfer-agent.js install-service --print --bin /usr/local/bin/xfer-agent > agent/systemd/xfer-agent.service
    expect(run.stdout).toBe(readFileSync(SHIPPED_AGENT_UNIT, 'utf8'));
  });

  test('without --bin, the unit runs the xfer-agent that ran the command: node and the script here', () => {
    expect(runningCommand()).toEqual([process.execPath, resolve(process.argv[1])]);
  });
});

describe('systemd-analyze verify', () => {
  test('accepts the shipped units of the agent and the control plane (ExecStart pointed at a real file)', () => {
    const units = [SHIPPED_AGENT_UNIT, SHIPPED_SERVER_UNIT].map((file) => {
      const text = readFileSync(file, 'utf8');
      expect(text).toMatch(/\nExecStart=\/usr\/local\/bin\/xfer-(agent|server) start\n/);
      const copy = join(dir, file.slice(file.lastIndexOf('/') + 1));
      writeFileSync(copy, text.replace(/\nExecStart=\S+/, `\nExecStart=${exe}`));
      return copy;
    });
    expect(verify(...units)).toEqual({ code: 0, stdout: '', stderr: '' });
  });

  test('accepts the units install-service writes, with a dynamic user and with a user and allowed roots', () => {
    const data = join(dir, 'data');
    mkdirSync(data);
    expect(install(['--url', URL_, ...dirs()], { env: { XFER_AGENT_TOKEN: TOKEN } }).code).toBe(0);
    expect(install(['--url', URL_, '--name', 'xfer-agent-nfs', '--user', 'xferagent', '--allow-roots', data, ...dirs()], { env: { XFER_AGENT_TOKEN: TOKEN } }).code).toBe(0);
    expect(verify(join(unitDir, 'xfer-agent.service'), join(unitDir, 'xfer-agent-nfs.service'))).toEqual({ code: 0, stdout: '', stderr: '' });
  });

  test('an allowed root under /home makes ProtectHome read-only (a hidden /home would drop ReadWritePaths under it)', () => {
    const file = join(dir, 'xfer-agent-home.service');
    const unit = renderAgentUnit({ name: 'xfer-agent-home', command: [exe], envFile: '/etc/xfer/xfer-agent-home.env', user: 'ops', allowRoots: ['/home/ops/exchange'] });
    expect(unit).toContain('\nProtectHome=read-only\n');
    expect(unit).toContain('\nReadWritePaths=/home/ops/exchange\n');
    expect(unit).toContain('\nConfigurationDirectory=xfer\n');
    writeFileSync(file, unit);
    expect(verify(file)).toEqual({ code: 0, stdout: '', stderr: '' });
  });

  test('reports a broken unit (the check can fail)', () => {
    const broken = join(dir, 'broken.service');
    writeFileSync(broken, readFileSync(SHIPPED_AGENT_UNIT, 'utf8').replace(/\nExecStart=\S+/, `\nExecStart=${join(dir, 'missing')}`).replace('KillMode=mixed', 'KillMode=gently'));
    const run = verify(broken);
    expect(run.code).not.toBe(0);
    expect(run.stderr).toContain('is not executable');
    expect(run.stderr).toContain('Failed to parse kill mode specification, ignoring: gently');
  });
});
