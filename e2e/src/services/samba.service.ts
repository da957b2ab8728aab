import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { acceptsTcp, findExecutable, isAlive, startServerProcess } from '@xfer/control-plane/process';
import type { Env, ServiceContext, ServiceDefinition, ServiceRecord } from './types.js';

/** The Unix account that owns the shares and that smbd maps the SMB user to (no shell, no home). */
export const SMB_TEST_USER = 'xfer-smb';

/**
 * Samba's smbd (Debian `samba`) for the smb connector, as root, with an smb.conf, passdb, state
 * and log of its own in the data dir, on a free 127.0.0.1 port, without nmbd or systemd. Shares:
 * `xfer` (writable, owned by SMB_TEST_USER), `ro` (read only: writes are ACCESS_DENIED) and `enc`
 * (`smb encrypt = required`). Async
 * I/O stays at Samba's default, so reads and writes get interim STATUS_PENDING answers — the
 * path a client must handle. `smb-signed` is the same with `server signing = mandatory`.
 */
export const smb: ServiceDefinition = sambaService('smb', 'XFER_TEST_SMB', 'Samba smbd, SMB2/3, NTLMv2 (needs root)', []);
export const smbSigned: ServiceDefinition = sambaService('smb-signed', 'XFER_TEST_SMB_SIGNED', 'Samba smbd with server signing = mandatory (needs root)', ['server signing = mandatory']);

function sambaService(name: string, prefix: string, summary: string, extraGlobal: string[]): ServiceDefinition {
  return {
    name,
    summary,
    provides: [`${prefix}_HOST`, `${prefix}_PORT`, `${prefix}_USER`, `${prefix}_PASSWORD`, `${prefix}_SHARE`, `${prefix}_ROOT`],
    async install(ctx) {
      ensureSamba(ctx);
      ensureSmbUser(ctx.env);
    },
    async start(ctx) {
      const { smbd, smbpasswd } = ensureSamba(ctx);
      ensureSmbUser(ctx.env);
      const d = ctx.dataDir;
      const password = randomBytes(18).toString('base64url');
      // mkdtemp made the data dir 0700; the user smbd switches to must reach the shares.
      await chmod(d, 0o711);
      for (const dir of ['private', 'state', 'lock', 'cache', 'run', 'ncalrpc']) await mkdir(join(d, dir), { mode: 0o755 });
      const root = join(d, 'share');
      const readonly = join(d, 'readonly');
      await mkdir(root, { mode: 0o755 });
      await mkdir(readonly, { mode: 0o755 });
      await writeFile(join(readonly, 'file.txt'), 'read only\n', { mode: 0o644 });
      run('chown', [`${SMB_TEST_USER}:`, root], ctx.env);
      const config = join(d, 'smb.conf');
      let userAdded = false;
      const { pid, port } = await startServerProcess({
        name: 'smbd',
        bin: smbd,
        args: () => ['--foreground', '--no-process-group', '--debug-stdout', '-s', config],
        logPath: join(d, 'smbd.out'),
        env: ctx.env,
        timeoutMs: 20_000,
        beforeSpawn: async (p) => {
          await writeFile(config, smbConfig({ dir: d, port: p, root, readonly, extraGlobal }), { mode: 0o644 });
          if (userAdded) return;
          // The password through stdin (twice: new and confirm), never the process list.
          const added = spawnSync(smbpasswd, ['-c', config, '-a', '-s', SMB_TEST_USER], { input: `${password}\n${password}\n`, env: ctx.env as NodeJS.ProcessEnv, encoding: 'utf8' });
          if (added.status !== 0) throw new Error(`smbpasswd failed: ${added.stderr}`);
          userAdded = true;
        },
      });
      return {
        pid,
        env: {
          [`${prefix}_HOST`]: '127.0.0.1',
          [`${prefix}_PORT`]: String(port),
          [`${prefix}_USER`]: SMB_TEST_USER,
          [`${prefix}_PASSWORD`]: password,
          [`${prefix}_SHARE`]: 'xfer',
          [`${prefix}_ROOT`]: root,
          [`${prefix}_READONLY_SHARE`]: 'ro',
          [`${prefix}_READONLY_ROOT`]: readonly,
          [`${prefix}_ENCRYPTED_SHARE`]: 'enc',
        },
      };
    },
    isHealthy: (record) => acceptsTcp(Number(record.env[`${prefix}_PORT`])),
    stop: stopProcessGroup,
  };
}

/**
 * smbd forks a child per client connection; with `--no-process-group` they all stay in the group
 * the detached spawn created, so the whole group is signalled. Idempotent: a gone group is done.
 */
async function stopProcessGroup(record: ServiceRecord): Promise<void> {
  const signal = (sig: NodeJS.Signals) => {
    try {
      process.kill(-record.pid, sig);
      return true;
    } catch {
      return false;
    }
  };
  if (!signal('SIGTERM')) return;
  for (let i = 0; i < 50; i++) {
    await sleep(100);
    if (!groupAlive(record.pid)) return;
  }
  signal('SIGKILL');
  for (let i = 0; i < 50 && isAlive(record.pid); i++) await sleep(100);
}

function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}

function smbConfig(o: { dir: string; port: number; root: string; readonly: string; extraGlobal: string[] }): string {
  const d = o.dir;
  return [
    '[global]',
    `smb ports = ${o.port}`,
    'interfaces = 127.0.0.1',
    'bind interfaces only = yes',
    'disable netbios = yes',
    'server services = -nbt',
    'server role = standalone server',
    'server min protocol = SMB2_02',
    'ntlm auth = ntlmv2-only',
    'map to guest = never',
    `passdb backend = tdbsam:${d}/private/passdb.tdb`,
    `private dir = ${d}/private`,
    `state directory = ${d}/state`,
    `lock directory = ${d}/lock`,
    `cache directory = ${d}/cache`,
    `pid directory = ${d}/run`,
    `ncalrpc dir = ${d}/ncalrpc`,
    `log file = ${d}/smbd.log`,
    'log level = 1',
    'load printers = no',
    'printcap name = /dev/null',
    'disable spoolss = yes',
    // Tests open many connections at once; the default is unlimited, said here on purpose.
    'max connections = 0',
    ...o.extraGlobal,
    '',
    '[xfer]',
    `path = ${o.root}`,
    'read only = no',
    `valid users = ${SMB_TEST_USER}`,
    'create mask = 0644',
    'directory mask = 0755',
    '',
    '[ro]',
    `path = ${o.readonly}`,
    'read only = yes',
    `valid users = ${SMB_TEST_USER}`,
    '',
    // A share only encrypting clients may use: how the connector says it cannot.
    '[enc]',
    `path = ${o.readonly}`,
    'read only = yes',
    `valid users = ${SMB_TEST_USER}`,
    'smb encrypt = required',
    '',
  ].join('\n');
}

/** Creates the Unix account smbd maps the test user to, when missing. */
function ensureSmbUser(env: Env): void {
  if (process.getuid?.() !== 0) throw new Error('the smb test server must run as root (smbd switches to the share user)');
  if (spawnSync('id', ['-u', SMB_TEST_USER], { env: env as NodeJS.ProcessEnv }).status === 0) return;
  run('useradd', ['--system', '--no-create-home', '--home-dir', '/nonexistent', '--shell', '/usr/sbin/nologin', SMB_TEST_USER], withSbin(env));
}

/** Paths of smbd and smbpasswd, installing Debian's samba first when missing. */
function ensureSamba(ctx: ServiceContext): { smbd: string; smbpasswd: string } {
  const find = () => {
    const smbd = findExecutable('smbd', ctx.env) ?? (existsSync('/usr/sbin/smbd') ? '/usr/sbin/smbd' : null);
    const smbpasswd = findExecutable('smbpasswd', ctx.env) ?? (existsSync('/usr/bin/smbpasswd') ? '/usr/bin/smbpasswd' : null);
    return smbd && smbpasswd ? { smbd, smbpasswd } : null;
  };
  const found = find();
  if (found) return found;
  if (process.getuid?.() !== 0) throw new Error('the smb test server must run as root to install samba');
  ctx.log('smb: installing samba and smbclient with apt-get');
  const env = { ...ctx.env, DEBIAN_FRONTEND: 'noninteractive' };
  const install = () => spawnSync('apt-get', ['install', '-y', '-q', '--no-install-recommends', 'samba', 'smbclient'], { env: env as NodeJS.ProcessEnv, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  let result = install();
  if (result.status !== 0) {
    // A fresh machine may have no package lists yet.
    run('apt-get', ['update', '-q'], env);
    result = install();
  }
  const installed = find();
  if (result.status !== 0 || !installed) throw new Error(`could not install samba (apt-get exit ${result.status}):\n${(result.stderr ?? '').slice(-2000)}`);
  return installed;
}

/** useradd lives in /usr/sbin, which a non-login PATH may lack. */
function withSbin(env: Env): Env {
  const path = env.PATH ?? '/usr/bin:/bin';
  return path.split(':').includes('/usr/sbin') ? env : { ...env, PATH: `${path}:/usr/sbin:/sbin` };
}

function run(cmd: string, args: string[], env: Env): void {
  const result = spawnSync(cmd, args, { env: env as NodeJS.ProcessEnv, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  if (result.error) throw new Error(`${cmd}: ${result.error.message}`);
  if (result.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed (exit ${result.status}): ${result.stderr.trim()}`);
}
