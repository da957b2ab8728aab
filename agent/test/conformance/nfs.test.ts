import { spawn } from 'node:child_process';
import { chmod } from 'node:fs/promises';
import type { ConnectionSettings } from '@xfer/shared';
import { createConnector } from '../../src/connectors/index.js';
import { createNfsConnector, NfsConnector } from '../../src/connectors/nfs/nfs.connector.js';
import { allowingRoots } from '../helpers/tree.js';
import { runConformance, type ConformanceTarget } from './conformance.suite.js';
import { bodyOf, closedPort, collect, expectCode, randomBody, sha256Of, uniqueName } from './helpers.js';
import { RawNfsExport } from './nfs.raw.js';

// nfs-ganesha of `npm run services` (e2e/src/services/ganesha.service.ts), started by jest's global setup.
const env = process.env;
const server = {
  host: env.XFER_TEST_NFS_HOST!,
  port: Number(env.XFER_TEST_NFS_PORT),
  mountPort: env.XFER_TEST_NFS_MOUNT_PORT!,
  exportPath: env.XFER_TEST_NFS_EXPORT!,
  refusedExport: env.XFER_TEST_NFS_REFUSED_EXPORT!,
  root: env.XFER_TEST_NFS_ROOT!,
};
const ROOT_ID = { uid: 0, gid: 0 };
const MiB = 1024 * 1024;

function settings(path: string, over: Partial<ConnectionSettings> = {}): ConnectionSettings {
  return {
    id: '000000000000000000000001', name: 'nfs conformance', type: 'nfs', host: server.host, port: server.port,
    path, options: { mount_port: server.mountPort }, agent_id: null, credentials: ROOT_ID, ...over,
  };
}

/** Userspace NFSv3 on a fresh directory of the export, as root (the export does not squash root). */
runConformance('nfs (ganesha, userspace NFSv3)', async (): Promise<ConformanceTarget> => {
  const name = uniqueName('conformance');
  const raw = await RawNfsExport.create(server.root, name);
  // Only its owner (root) may enter: uid 1000 is refused there.
  const privateDir = await RawNfsExport.create(server.root, `${name}-private`, 0o700);
  const base = `${server.exportPath}/${name}`;
  const port = await closedPort();
  return {
    connector: () => createNfsConnector(settings(base)),
    raw,
    failures: [
      { name: 'unknown host', connector: () => new NfsConnector(settings(base, { host: 'no-such-host.invalid' })), code: 'TRANSIENT', message: /cannot resolve/ },
      { name: 'wrong port', connector: () => new NfsConnector(settings(base, { port })), code: 'TRANSIENT', message: new RegExp(`127.0.0.1:${port}: connection refused \\(is an NFS server`) },
      { name: 'wrong MOUNT port', connector: () => new NfsConnector(settings(base, { options: { mount_port: String(port) } })), code: 'TRANSIENT', message: /connection refused \(is a MOUNT server/ },
      { name: 'export refused to this client', connector: () => new NfsConnector(settings(server.refusedExport)), code: 'PERMISSION', message: /refuses to export \/refused/ },
      { name: 'uid without permission', connector: () => new NfsConnector(settings(`${server.exportPath}/${name}-private`, { credentials: { uid: 1000, gid: 1000 } })), code: 'PERMISSION', message: /permission denied as uid 1000 gid 1000/ },
      { name: 'missing base path', connector: () => new NfsConnector(settings(`${base}/missing`)), code: 'NOT_FOUND', message: /base path .*\/missing does not exist/ },
    ],
    // The base is root's, 0755: nobody (the default identity) may not write there.
    readOnly: () => new NfsConnector(settings(base, { credentials: {} })),
    unreachable: () => new NfsConnector(settings(base, { port })),
    listPastOnePage: true,
    modTime: 'set',
    cleanup: async () => {
      await raw.destroy();
      await privateDir.destroy();
    },
  };
});

/**
 * Mounted mode: the fs connector on the directory where the export is mounted. No NFS client can
 * mount here (no kernel NFS, no fuse-nfs in Debian 12), so the "mount" is the exported directory
 * itself, which is what a mount shows the agent.
 */
runConformance('nfs (mounted mode, the exported directory)', async (): Promise<ConformanceTarget> => {
  const name = uniqueName('mounted');
  const raw = await RawNfsExport.create(server.root, name);
  const mounted = (path: string, mountPath = server.root) => settings(path, { options: { mount_path: mountPath } });
  // The agent's owner allows the mount point (and the missing one of the failure case) explicitly.
  const context = { access: allowingRoots(server.root, `${server.root}-not-mounted`) };
  return {
    connector: () => createNfsConnector(mounted(`/${name}`), context),
    raw,
    failures: [
      { name: 'missing mount path', connector: () => createNfsConnector(mounted(`/${name}`, `${server.root}-not-mounted`), context), code: 'NOT_FOUND', message: /mount path .* does not exist on the agent host/ },
      { name: 'missing base path below the mount', connector: () => createNfsConnector(mounted(`/${name}/missing`), context), code: 'NOT_FOUND', message: /does not exist/ },
    ],
    listPastOnePage: true,
    modTime: 'set',
    cleanup: () => raw.destroy(),
  };
});

describe('nfs connector: identity, connection and speed', () => {
  it('is the registry\'s connector for nfs connections', async () => {
    const c = await createConnector(settings(server.exportPath));
    expect(c).toBeInstanceOf(NfsConnector);
    await c.close();
  });

  let raw: RawNfsExport;
  beforeAll(async () => {
    raw = await RawNfsExport.create(server.root, uniqueName('nfs'));
    // Anyone may create files here, so the owner is whoever the AUTH_SYS credential says.
    await chmod(raw.dir, 0o777);
  });
  afterAll(() => raw.destroy());
  const base = () => `${server.exportPath}/${raw.dir.split('/').pop()}`;

  it('creates files and directories as credentials.uid/gid, and as nobody (65534) by default', async () => {
    const c = new NfsConnector(settings(base(), { credentials: { uid: 1234, gid: 5678 } }));
    await c.write('owned/by/1234.txt', bodyOf('mine'), {});
    expect(await raw.owner('owned/by/1234.txt')).toBe('1234:5678');
    expect(await raw.owner('owned/by')).toBe('1234:5678');
    await c.close();
    const nobody = new NfsConnector(settings(base(), { credentials: {} }));
    await expect(nobody.test()).resolves.toMatch(/acting as uid 65534 gid 65534/);
    await nobody.write('nobody.txt', bodyOf('x'), {});
    expect(await raw.owner('nobody.txt')).toBe('65534:65534');
    await nobody.close();
  });

  it('without options.mount_port asks rpcbind, and says to set it when none answers', async () => {
    // The test server's rpcbind lives in a network namespace of its own: port 111 here is closed.
    const c = new NfsConnector(settings(base(), { options: {} }));
    await expectCode(c.test(), 'TRANSIENT', /127.0.0.1:111: connection refused.*options.mount_port/);
    await c.close();
  });

  it('goes on after its connection drops in the middle of a read, re-sending what was in flight', async () => {
    const { body, sha256 } = randomBody(24 * MiB);
    const c = new NfsConnector(settings(base()), { readDepth: 4, maxIoBytes: 256 * 1024 });
    await c.write('dropped.bin', body, {});
    const stream = await c.read('dropped.bin');
    const rpc = () => (c as unknown as { session: Promise<{ nfs: { rpc: { drop(): void } } }> }).session;
    let chunks = 0;
    let drops = 0;
    stream.on('data', () => {
      if (++chunks % 20 === 5) {
        drops++;
        void rpc().then((s) => s.nfs.rpc.drop());
      }
    });
    expect(await sha256Of(stream)).toBe(sha256());
    expect(drops).toBeGreaterThan(0);
    expect(await collect(c.list('', { recursive: false }))).toEqual(expect.arrayContaining([expect.objectContaining({ path: 'dropped.bin', size: 24 * MiB })]));
    await c.close();
  });

  it('writes and reads 200 MiB, measured against nfs-cat (libnfs) reading the same file', async () => {
    const bytes = 200 * MiB;
    const c = new NfsConnector(settings(base(), { credentials: ROOT_ID }));
    const { body, sha256 } = randomBody(bytes, 1024 * 1024);
    let t = Date.now();
    await c.write('big.bin', body, { size: bytes });
    const writeMs = Date.now() - t;
    t = Date.now();
    expect(await sha256Of(await c.read('big.bin'))).toBe(sha256());
    const readMs = Date.now() - t;
    t = Date.now();
    const name = raw.dir.split('/').pop();
    const cat = spawn('nfs-cat', [`nfs://${server.host}${server.exportPath}/${name}/big.bin?version=3&nfsport=${server.port}&mountport=${server.mountPort}`], { stdio: ['ignore', 'pipe', 'inherit'] });
    expect(await sha256Of(cat.stdout)).toBe(sha256());
    const catMs = Date.now() - t;
    const rate = (ms: number) => `${Math.round(bytes / MiB / (ms / 1000))} MiB/s`;
    process.stderr.write(`nfs throughput, 200 MiB: connector write ${rate(writeMs)}, read ${rate(readMs)} (SHA-256 included); nfs-cat read ${rate(catMs)}\n`);
    await c.close();
  }, 120_000);
});
