import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { acceptsTcp, findExecutable, startServerProcess } from '@xfer/control-plane/process';
import { ensureUser } from './sshd.service.js';
import type { Env, ServiceContext, ServiceDefinition } from './types.js';

/**
 * PAM service vsftpd authenticates with. Debian's own (`/etc/pam.d/vsftpd`) requires a login
 * shell listed in /etc/shells, which the shared test user (nologin, sftp only) has not.
 */
const PAM_SERVICE = 'xfer-test-vsftpd';
/** Passive data ports: below Linux's ephemeral range; vsftpd picks one at random and retries a taken one. */
const PASV_PORTS = [20_000, 29_999] as const;
/**
 * The system user tests log in as. Not the sftp service's user: vsftpd refuses a login whose home
 * directory does not exist, and that one's is /nonexistent. It shares that user's per-machine password.
 */
export const FTP_TEST_USER = 'xfer-ftp';

/**
 * vsftpd for the ftp connector: its own config, self-signed certificate and log in the data dir,
 * control port on a free 127.0.0.1 port, passive mode only. Plain FTP and explicit TLS (AUTH TLS)
 * on the same port. Logs in a system user of its own (FTP_TEST_USER) with the sftp service's
 * per-machine password, so it runs as root.
 */
export const ftp: ServiceDefinition = {
  name: 'ftp',
  summary: 'vsftpd, plain FTP and explicit FTPS, passive mode (needs root)',
  provides: ['XFER_TEST_FTP_HOST', 'XFER_TEST_FTP_PORT', 'XFER_TEST_FTP_USER', 'XFER_TEST_FTP_PASSWORD', 'XFER_TEST_FTP_ROOT'],
  async install(ctx) {
    await ensureVsftpd(ctx);
    await ensureFtpUser(ctx);
  },
  async start(ctx) {
    const vsftpd = await ensureVsftpd(ctx);
    const password = await ensureFtpUser(ctx);
    await writePamService();
    const d = ctx.dataDir;
    // mkdtemp made the data dir 0700; the user must traverse it to reach its root.
    await chmod(d, 0o711);
    const root = join(d, 'root');
    await mkdir(root, { mode: 0o755 });
    run('chown', [`${FTP_TEST_USER}:`, root], ctx.env);
    // Owned by root and not writable by the user: where tests provoke PERMISSION.
    const readonly = join(d, 'readonly');
    await mkdir(readonly, { mode: 0o755 });
    await writeFile(join(readonly, 'file.txt'), 'read only\n', { mode: 0o644 });
    // vsftpd's secure_chroot_dir: empty, owned by root, not writable.
    const empty = join(d, 'empty');
    await mkdir(empty, { mode: 0o555 });

    const cert = join(d, 'cert.pem');
    const key = join(d, 'key.pem');
    run('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '30', '-subj', '/CN=127.0.0.1',
      '-addext', 'subjectAltName=IP:127.0.0.1', '-keyout', key, '-out', cert], ctx.env);
    await chmod(key, 0o600);
    const fingerprint = certFingerprint(await readFile(cert, 'utf8'), ctx.env);

    const config = join(d, 'vsftpd.conf');
    const logPath = join(d, 'vsftpd.log');
    const { pid, port } = await startServerProcess({
      name: 'vsftpd',
      bin: vsftpd,
      args: () => [config],
      logPath: join(d, 'vsftpd.out'),
      env: ctx.env,
      timeoutMs: 15_000,
      beforeSpawn: (port) => writeFile(config, vsftpdConfig({ port, empty, cert, key, logPath }), { mode: 0o600 }),
    });
    return {
      pid,
      env: {
        XFER_TEST_FTP_HOST: '127.0.0.1',
        XFER_TEST_FTP_PORT: String(port),
        XFER_TEST_FTP_USER: FTP_TEST_USER,
        XFER_TEST_FTP_PASSWORD: password,
        XFER_TEST_FTP_ROOT: root,
        XFER_TEST_FTP_READONLY_DIR: readonly,
        XFER_TEST_FTP_CERT_SHA256: fingerprint,
      },
    };
  },
  isHealthy: (record) => acceptsTcp(Number(record.env.XFER_TEST_FTP_PORT)),
};

function vsftpdConfig(o: { port: number; empty: string; cert: string; key: string; logPath: string }): string {
  return [
    'listen=YES',
    'listen_ipv6=NO',
    'listen_address=127.0.0.1',
    `listen_port=${o.port}`,
    'background=NO',
    'anonymous_enable=NO',
    'local_enable=YES',
    'write_enable=YES',
    'local_umask=022',
    'chroot_local_user=NO',
    'userlist_enable=NO',
    `pam_service_name=${PAM_SERVICE}`,
    `secure_chroot_dir=${o.empty}`,
    // The seccomp sandbox kills sessions on syscalls of newer libcs and kernels.
    'seccomp_sandbox=NO',
    'port_enable=NO',
    'connect_from_port_20=NO',
    'pasv_enable=YES',
    `pasv_min_port=${PASV_PORTS[0]}`,
    `pasv_max_port=${PASV_PORTS[1]}`,
    'pasv_address=127.0.0.1',
    'utf8_filesystem=YES',
    // The connector works several sessions in parallel; tests open several connectors.
    'max_clients=200',
    'max_per_ip=200',
    'idle_session_timeout=600',
    'data_connection_timeout=120',
    'ssl_enable=YES',
    'allow_anon_ssl=NO',
    // Plain and TLS sessions on the same server: the connector is tested both ways.
    'force_local_logins_ssl=NO',
    'force_local_data_ssl=NO',
    'ssl_tlsv1=YES',
    'ssl_sslv2=NO',
    'ssl_sslv3=NO',
    'require_ssl_reuse=YES',
    `rsa_cert_file=${o.cert}`,
    `rsa_private_key_file=${o.key}`,
    'xferlog_enable=YES',
    'xferlog_std_format=NO',
    'log_ftp_protocol=YES',
    `vsftpd_log_file=${o.logPath}`,
    '',
  ].join('\n');
}

/** Creates the ftp test user when missing (home `/`, no shell) and gives it the machine's test password. */
async function ensureFtpUser(ctx: ServiceContext): Promise<string> {
  const password = await ensureUser(ctx);
  const env = withSbin(ctx.env);
  if (spawnSync('id', ['-u', FTP_TEST_USER], { env: env as NodeJS.ProcessEnv }).status !== 0) {
    ctx.log(`ftp: creating the system user ${FTP_TEST_USER} (no shell)`);
    run('useradd', ['--system', '--no-create-home', '--home-dir', '/', '--shell', '/usr/sbin/nologin', FTP_TEST_USER], env);
  }
  const result = spawnSync('chpasswd', [], { input: `${FTP_TEST_USER}:${password}\n`, env: env as NodeJS.ProcessEnv, encoding: 'utf8' });
  if (result.status !== 0) throw new Error(`chpasswd failed: ${result.stderr}`);
  return password;
}

/** useradd and chpasswd live in /usr/sbin, which a non-login PATH may lack. */
function withSbin(env: Env): Env {
  const path = env.PATH ?? '/usr/bin:/bin';
  return path.split(':').includes('/usr/sbin') ? env : { ...env, PATH: `${path}:/usr/sbin:/sbin` };
}

/** Password login of system users without Debian's shell check (see PAM_SERVICE). */
async function writePamService(): Promise<void> {
  const file = join('/etc/pam.d', PAM_SERVICE);
  const content = ['# Written by the xfer test services (e2e/src/services/vsftpd.service.ts).', '@include common-auth', '@include common-account', '@include common-session', ''].join('\n');
  if ((await readFile(file, 'utf8').catch(() => '')) !== content) await writeFile(file, content, { mode: 0o644 });
}

/** SHA-256 fingerprint of a PEM certificate as Node prints it (`AB:CD:...`), for options.tls_cert_sha256. */
function certFingerprint(pem: string, env: Env): string {
  const result = spawnSync('openssl', ['x509', '-noout', '-fingerprint', '-sha256'], { input: pem, env: env as NodeJS.ProcessEnv, encoding: 'utf8' });
  const match = /=([0-9A-F:]+)/.exec(result.stdout ?? '');
  if (result.status !== 0 || !match) throw new Error(`openssl x509 -fingerprint failed: ${result.stderr}`);
  return match[1]!;
}

/** Path of vsftpd, installing Debian's vsftpd first when it is missing. */
async function ensureVsftpd(ctx: ServiceContext): Promise<string> {
  const found = () => findExecutable('vsftpd', ctx.env) ?? (existsSync('/usr/sbin/vsftpd') ? '/usr/sbin/vsftpd' : null);
  const existing = found();
  if (existing) return existing;
  if (process.getuid?.() !== 0) throw new Error('the ftp test server must run as root to install vsftpd');
  ctx.log('ftp: installing vsftpd with apt-get');
  const env = { ...ctx.env, DEBIAN_FRONTEND: 'noninteractive' };
  const install = () => spawnSync('apt-get', ['install', '-y', '-q', '--no-install-recommends', 'vsftpd'], { env: env as NodeJS.ProcessEnv, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  let result = install();
  if (result.status !== 0) {
    // A fresh machine may have no package lists yet.
    run('apt-get', ['update', '-q'], env);
    result = install();
  }
  const vsftpd = found();
  if (result.status !== 0 || !vsftpd) throw new Error(`could not install vsftpd (apt-get exit ${result.status}):\n${(result.stderr ?? '').slice(-2000)}`);
  return vsftpd;
}

function run(cmd: string, args: string[], env: Env): void {
  const result = spawnSync(cmd, args, { env: env as NodeJS.ProcessEnv, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  if (result.error) throw new Error(`${cmd}: ${result.error.message}`);
  if (result.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed (exit ${result.status}): ${result.stderr.trim()}`);
}
