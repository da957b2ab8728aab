import { spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { acceptsTcp, findExecutable, startServerProcess } from '@xfer/control-plane/process';
import type { Env, ServiceContext, ServiceDefinition } from './types.js';

/** The system user tests log in as (password and key). Only sftp is allowed: ForceCommand internal-sftp. */
export const SFTP_TEST_USER = 'xfer-sftp';
/** Passphrase of the encrypted test key (XFER_TEST_SFTP_ENC_KEY_FILE); a test value, not a secret. */
const ENC_KEY_PASSPHRASE = 'xfer-test-passphrase';

/**
 * OpenSSH sshd for the sftp connector: its own config, host key, log and pidfile in the data dir,
 * listening on a free 127.0.0.1 port. Runs as root with `UsePAM yes` so that a real system user
 * (`xfer-sftp`, no shell, sftp only) logs in with a password or a key.
 *
 * The user's password is one per machine (kept 0600 in the cache dir), not one per server: every
 * sshd started here authenticates the same system user, and a per-start password would lock out
 * the servers of other checkouts.
 */
export const sftp: ServiceDefinition = {
  name: 'sftp',
  summary: 'OpenSSH sshd with internal-sftp, password and key auth (needs root)',
  provides: ['XFER_TEST_SFTP_HOST', 'XFER_TEST_SFTP_PORT', 'XFER_TEST_SFTP_USER', 'XFER_TEST_SFTP_PASSWORD', 'XFER_TEST_SFTP_ROOT'],
  async install(ctx) {
    await ensureSshd(ctx);
    await ensureUser(ctx);
  },
  async start(ctx) {
    const sshd = await ensureSshd(ctx);
    const password = await ensureUser(ctx);
    const d = ctx.dataDir;
    // The privilege-separation directory sshd insists on (normally made by the init script).
    await mkdir('/run/sshd', { recursive: true, mode: 0o755 });
    // mkdtemp made the data dir 0700; the user must traverse it to reach its root.
    await chmod(d, 0o711);
    const root = join(d, 'root');
    await mkdir(root, { mode: 0o755 });
    run('chown', [`${SFTP_TEST_USER}:`, root], ctx.env);
    // Owned by root and not writable by the user: where tests provoke PERMISSION.
    const readonly = join(d, 'readonly');
    await mkdir(readonly, { mode: 0o755 });
    await writeFile(join(readonly, 'file.txt'), 'read only\n', { mode: 0o644 });

    run('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'xfer-test-host', '-f', join(d, 'host_ed25519_key')], ctx.env);
    run('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'xfer-test-user', '-f', join(d, 'user_ed25519_key')], ctx.env);
    run('ssh-keygen', ['-q', '-t', 'ed25519', '-N', ENC_KEY_PASSPHRASE, '-C', 'xfer-test-user-enc', '-f', join(d, 'user_enc_key')], ctx.env);
    const userKeys = await Promise.all(['user_ed25519_key.pub', 'user_enc_key.pub'].map((f) => readFile(join(d, f), 'utf8')));
    await writeFile(join(d, 'authorized_keys'), userKeys.join(''), { mode: 0o644 });
    const hostKeySha256 = fingerprint(await readFile(join(d, 'host_ed25519_key.pub'), 'utf8'));

    const config = join(d, 'sshd_config');
    const logPath = join(d, 'sshd.log');
    const { pid, port } = await startServerProcess({
      name: 'sshd',
      // sshd re-executes itself, so it must be started by absolute path; -D keeps it in the foreground.
      bin: sshd,
      args: () => ['-D', '-f', config, '-E', logPath],
      logPath,
      env: ctx.env,
      timeoutMs: 15_000,
      beforeSpawn: (port) => writeFile(config, sshdConfig(d, port)),
    });
    return {
      pid,
      env: {
        XFER_TEST_SFTP_HOST: '127.0.0.1',
        XFER_TEST_SFTP_PORT: String(port),
        XFER_TEST_SFTP_USER: SFTP_TEST_USER,
        XFER_TEST_SFTP_PASSWORD: password,
        XFER_TEST_SFTP_KEY_FILE: join(d, 'user_ed25519_key'),
        XFER_TEST_SFTP_ENC_KEY_FILE: join(d, 'user_enc_key'),
        XFER_TEST_SFTP_ENC_KEY_PASSPHRASE: ENC_KEY_PASSPHRASE,
        XFER_TEST_SFTP_HOST_KEY_SHA256: hostKeySha256,
        XFER_TEST_SFTP_ROOT: root,
        XFER_TEST_SFTP_READONLY_DIR: readonly,
      },
    };
  },
  isHealthy: (record) => acceptsTcp(Number(record.env.XFER_TEST_SFTP_PORT)),
};

function sshdConfig(dataDir: string, port: number): string {
  return [
    `Port ${port}`,
    'ListenAddress 127.0.0.1',
    `HostKey ${join(dataDir, 'host_ed25519_key')}`,
    `PidFile ${join(dataDir, 'sshd.pid')}`,
    `AuthorizedKeysFile ${join(dataDir, 'authorized_keys')}`,
    // The data dir lives under /tmp, whose modes StrictModes would refuse.
    'StrictModes no',
    // Password logins of a real system user go through PAM (pam_unix reads /etc/shadow as root).
    'UsePAM yes',
    'PasswordAuthentication yes',
    'KbdInteractiveAuthentication no',
    'PubkeyAuthentication yes',
    'PermitRootLogin no',
    `AllowUsers ${SFTP_TEST_USER}`,
    'Subsystem sftp internal-sftp',
    'ForceCommand internal-sftp',
    'AllowTcpForwarding no',
    'X11Forwarding no',
    // The connector opens a few SFTP channels per connection, tests open several connections.
    'MaxSessions 64',
    'MaxStartups 100:30:200',
    'LogLevel VERBOSE',
    '',
  ].join('\n');
}

/** `SHA256:<base64, no padding>` of an OpenSSH public key line, as `ssh-keygen -l` prints it. */
function fingerprint(publicKeyLine: string): string {
  const blob = Buffer.from(publicKeyLine.trim().split(/\s+/)[1] ?? '', 'base64');
  return `SHA256:${createHash('sha256').update(blob).digest('base64').replace(/=+$/, '')}`;
}

/** Path of sshd, installing Debian's openssh-server first when it is missing. */
async function ensureSshd(ctx: ServiceContext): Promise<string> {
  const found = () => findExecutable('sshd', ctx.env) ?? (existsSync('/usr/sbin/sshd') ? '/usr/sbin/sshd' : null);
  const existing = found();
  if (existing) return existing;
  requireRoot('install openssh-server');
  ctx.log('sftp: installing openssh-server with apt-get');
  const env = { ...ctx.env, DEBIAN_FRONTEND: 'noninteractive' };
  const install = () => spawnSync('apt-get', ['install', '-y', '-q', '--no-install-recommends', 'openssh-server'], { env: env as NodeJS.ProcessEnv, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  let result = install();
  if (result.status !== 0) {
    // A fresh machine may have no package lists yet.
    run('apt-get', ['update', '-q'], env);
    result = install();
  }
  const sshd = found();
  if (result.status !== 0 || !sshd) throw new Error(`could not install openssh-server (apt-get exit ${result.status}):\n${(result.stderr ?? '').slice(-2000)}`);
  return sshd;
}

/** Creates the test user when missing and sets its password; returns the password. The ftp service logs in as the same user. */
export async function ensureUser(ctx: ServiceContext): Promise<string> {
  requireRoot(`create the sftp test user ${SFTP_TEST_USER}`);
  if (spawnSync('id', ['-u', SFTP_TEST_USER], { env: ctx.env as NodeJS.ProcessEnv }).status !== 0) {
    ctx.log(`sftp: creating the system user ${SFTP_TEST_USER} (no shell, sftp only)`);
    run('useradd', ['--system', '--no-create-home', '--home-dir', '/nonexistent', '--shell', '/usr/sbin/nologin', SFTP_TEST_USER], ctx.env);
  }
  const password = await machinePassword(ctx.cacheDir);
  const result = spawnSync('chpasswd', [], { input: `${SFTP_TEST_USER}:${password}\n`, env: withSbin(ctx.env) as NodeJS.ProcessEnv, encoding: 'utf8' });
  if (result.status !== 0) throw new Error(`chpasswd failed: ${result.stderr}`);
  return password;
}

async function machinePassword(cacheDir: string): Promise<string> {
  const file = join(cacheDir, 'sftp-test-password');
  try {
    const saved = (await readFile(file, 'utf8')).trim();
    if (saved) return saved;
  } catch {
    // first use on this machine
  }
  await mkdir(cacheDir, { recursive: true });
  const password = randomBytes(18).toString('base64url');
  await writeFile(file, `${password}\n`, { mode: 0o600 });
  return password;
}

function requireRoot(what: string): void {
  if (process.getuid?.() !== 0) throw new Error(`the sftp test server must run as root to ${what} (sshd with a password user)`);
}

/** useradd, chpasswd and sshd live in /usr/sbin, which a non-login PATH may lack. */
function withSbin(env: Env): Env {
  const path = env.PATH ?? '/usr/bin:/bin';
  return path.split(':').includes('/usr/sbin') ? env : { ...env, PATH: `${path}:/usr/sbin:/sbin` };
}

function run(cmd: string, args: string[], env: Env): void {
  const result = spawnSync(cmd, args, { env: withSbin(env) as NodeJS.ProcessEnv, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  if (result.error) throw new Error(`${cmd}: ${result.error.message}`);
  if (result.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed (exit ${result.status}): ${result.stderr.trim()}`);
}
