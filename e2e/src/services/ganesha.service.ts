import { spawnSync } from 'node:child_process';
import { existsSync, readlinkSync } from 'node:fs';
import { chmod, mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { acceptsTcp, commandLine, findExecutable, freeLoopbackPort, isAlive, startServerProcess, stopPid } from '@xfer/control-plane/process';
import type { Env, ServiceContext, ServiceDefinition } from './types.js';

/** Debian 12's packages: the server, its VFS backend, the rpcbind it registers with, and libnfs's CLIs (nfs-cat, the throughput baseline). */
const PACKAGES = ['nfs-ganesha', 'nfs-ganesha-vfs', 'rpcbind', 'libnfs-utils'];
const VFS_FSAL = '/usr/lib/x86_64-linux-gnu/ganesha/libfsalvfs.so';

/**
 * Runs in a private mount namespace (`unshare -m`): a tmpfs over /run hides the host's, so the
 * rpcbind started here (its socket /run/rpcbind.sock, its lock and state files) is ours alone.
 * That rpcbind runs in a private network namespace too (`unshare -n`): its port 111 listens
 * nowhere the host can see, and a host rpcbind, if any, is neither needed nor disturbed.
 * ganesha 4.3 exits when it cannot register with rpcbind; it registers through the unix socket,
 * which both namespaces share. Then the shell becomes ganesha (exec), so the pid the caller
 * holds is the server's.
 */
const LAUNCHER = `set -e
d="$1"
mount --make-rprivate /
mount -t tmpfs -o mode=0755 xfer-nfs-run /run
unshare -n "$2" -f -w &
echo $! > "$d/rpcbind.pid"
i=0
while [ ! -S /run/rpcbind.sock ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
exec "$3" -F -f "$d/ganesha.conf" -L "$d/ganesha.log" -p "$d/ganesha.pid"
`;

/**
 * nfs-ganesha 4.3 (FSAL_VFS, NFSv3 and v4 over TCP) for the nfs connector, on free 127.0.0.1
 * ports (NFS and MOUNT), as root. Exports `<dataDir>/export` read-write without root squash as
 * `/export`, and `<dataDir>/refused` as `/refused` to no client (Access_Type = None), where
 * tests see a refused MOUNT. Clients need no rpcbind: the MOUNT port is given
 * (XFER_TEST_NFS_MOUNT_PORT).
 */
export const nfs: ServiceDefinition = {
  name: 'nfs',
  summary: 'nfs-ganesha 4.3, FSAL_VFS, NFSv3 and v4 (needs root)',
  provides: ['XFER_TEST_NFS_HOST', 'XFER_TEST_NFS_PORT', 'XFER_TEST_NFS_MOUNT_PORT', 'XFER_TEST_NFS_EXPORT', 'XFER_TEST_NFS_ROOT'],
  async install(ctx) {
    ensurePackages(ctx);
  },
  async start(ctx) {
    const bins = ensurePackages(ctx);
    const d = ctx.dataDir;
    await chmod(d, 0o755);
    const root = join(d, 'export');
    const refused = join(d, 'refused');
    await mkdir(root, { mode: 0o755 });
    await mkdir(refused, { mode: 0o755 });
    await mkdir(join(d, 'recovery'), { mode: 0o700 });
    const launcher = join(d, 'launch.sh');
    await writeFile(launcher, LAUNCHER, { mode: 0o700 });
    const mountPort = await freeLoopbackPort();
    const { pid, port } = await startServerProcess({
      name: 'ganesha',
      bin: bins.unshare,
      args: () => ['-m', '--', '/bin/sh', launcher, d, bins.rpcbind, bins.ganesha],
      logPath: join(d, 'ganesha.out'),
      env: ctx.env,
      timeoutMs: 30_000,
      beforeSpawn: (port) => writeFile(join(d, 'ganesha.conf'), ganeshaConfig({ port, mountPort, root, refused, recovery: join(d, 'recovery') })),
    });
    return {
      pid,
      env: {
        XFER_TEST_NFS_HOST: '127.0.0.1',
        XFER_TEST_NFS_PORT: String(port),
        XFER_TEST_NFS_MOUNT_PORT: String(mountPort),
        XFER_TEST_NFS_EXPORT: '/export',
        XFER_TEST_NFS_REFUSED_EXPORT: '/refused',
        XFER_TEST_NFS_ROOT: root,
      },
    };
  },
  isHealthy: async (record) => (await acceptsTcp(Number(record.env.XFER_TEST_NFS_PORT))) && (await acceptsTcp(Number(record.env.XFER_TEST_NFS_MOUNT_PORT))),
  async stop(record) {
    if (isAlive(record.pid) && (await commandLine(record.pid)).includes(record.dataDir)) await stopPid(record.pid, 10_000);
    // Our rpcbind, reparented to init once ganesha exits. Only if it is still ours: a recycled
    // pid would not be rpcbind in a network namespace other than this process's.
    const rpcbind = Number((await readFile(join(record.dataDir, 'rpcbind.pid'), 'utf8').catch(() => '')).trim());
    if (rpcbind > 0 && isAlive(rpcbind) && (await commandLine(rpcbind)).includes('rpcbind') && netns(rpcbind) !== netns(process.pid)) await stopPid(rpcbind);
  },
};

function ganeshaConfig(o: { port: number; mountPort: number; root: string; refused: string; recovery: string }): string {
  return `NFS_CORE_PARAM {
  NFS_Port = ${o.port};
  MNT_Port = ${o.mountPort};
  Bind_addr = 127.0.0.1;
  Enable_NLM = false;
  Enable_RQUOTA = false;
  Enable_UDP = false;
  NFS_Protocols = 3, 4;
  Mount_Path_Pseudo = true;
}
NFSV4 {
  Graceless = true;
  Allow_Numeric_Owners = true;
  Only_Numeric_Owners = true;
  RecoveryRoot = "${o.recovery}";
}
NFS_KRB5 { Active_krb5 = false; }
EXPORT {
  Export_Id = 1;
  Path = "${o.root}";
  Pseudo = /export;
  Access_Type = RW;
  Squash = No_Root_Squash;
  Protocols = 3, 4;
  Transports = TCP;
  SecType = sys;
  FSAL { Name = VFS; }
}
EXPORT {
  Export_Id = 2;
  Path = "${o.refused}";
  Pseudo = /refused;
  Access_Type = None;
  Protocols = 3, 4;
  Transports = TCP;
  SecType = sys;
  FSAL { Name = VFS; }
}
`;
}

function netns(pid: number): string {
  try {
    return readlinkSync(`/proc/${pid}/ns/net`);
  } catch {
    return '';
  }
}

/** Paths of unshare, rpcbind and ganesha.nfsd, installing Debian's packages first when one is missing. */
function ensurePackages(ctx: ServiceContext): { unshare: string; rpcbind: string; ganesha: string } {
  const find = () => ({
    unshare: findExecutable('unshare', ctx.env) ?? '/usr/bin/unshare',
    rpcbind: findExecutable('rpcbind', ctx.env) ?? '/usr/sbin/rpcbind',
    ganesha: findExecutable('ganesha.nfsd', ctx.env) ?? '/usr/bin/ganesha.nfsd',
  });
  const complete = (b: ReturnType<typeof find>) => [b.unshare, b.rpcbind, b.ganesha, VFS_FSAL, '/usr/bin/nfs-cat'].every((p) => existsSync(p));
  const found = find();
  if (complete(found)) return found;
  if (process.getuid?.() !== 0) throw new Error('the nfs test server must run as root to install nfs-ganesha');
  ctx.log(`nfs: installing ${PACKAGES.join(' ')} with apt-get`);
  const env: Env = { ...ctx.env, DEBIAN_FRONTEND: 'noninteractive' };
  const install = () => spawnSync('apt-get', ['install', '-y', '-q', '--no-install-recommends', ...PACKAGES], { env: env as NodeJS.ProcessEnv, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  let result = install();
  if (result.status !== 0) {
    // A fresh machine may have no package lists yet.
    spawnSync('apt-get', ['update', '-q'], { env: env as NodeJS.ProcessEnv, stdio: 'ignore' });
    result = install();
  }
  const after = find();
  if (result.status !== 0 || !complete(after)) throw new Error(`could not install ${PACKAGES.join(' ')} (apt-get exit ${result.status}):\n${(result.stderr ?? '').slice(-2000)}`);
  return after;
}
