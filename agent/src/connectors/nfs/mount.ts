import { ConnectorError } from '../types.js';
import { RpcClient, type RpcClientOptions } from './rpc.client.js';
import type { FileHandle } from './nfs3.protocol.js';
import { XdrWriter, type XdrReader } from './xdr.js';

/** RFC 1833 portmap v2 (rpcbind answers it too), and RFC 1813 appendix I MOUNT v3. */
const PORTMAP_PROGRAM = 100000;
const PORTMAP_PORT = 111;
const PMAPPROC_GETPORT = 3;
const IPPROTO_TCP = 6;
export const MOUNT_PROGRAM = 100005;
const MOUNT_V3 = 3;
const MOUNTPROC3_MNT = 1;

const MOUNT_STATES: Record<number, string> = {
  1: 'MNT3ERR_PERM', 2: 'MNT3ERR_NOENT', 5: 'MNT3ERR_IO', 13: 'MNT3ERR_ACCES', 20: 'MNT3ERR_NOTDIR',
  22: 'MNT3ERR_INVAL', 63: 'MNT3ERR_NAMETOOLONG', 10004: 'MNT3ERR_NOTSUPP', 10006: 'MNT3ERR_SERVERFAULT',
};

type Base = Omit<RpcClientOptions, 'port' | 'listener'>;

/** The TCP port of `program` version `version` on the host, asked of its portmapper (rpcbind) on port 111. */
export async function portOf(base: Base, program: number, version: number, signal?: AbortSignal): Promise<number> {
  const rpc = new RpcClient({ ...base, port: PORTMAP_PORT, listener: 'rpcbind (the portmapper)' });
  try {
    const args = new XdrWriter(16).u32(program).u32(version).u32(IPPROTO_TCP).u32(0).finish();
    const reply = await rpc.call(PORTMAP_PROGRAM, 2, PMAPPROC_GETPORT, [args], { signal }).catch((err: unknown) => {
      if (err instanceof ConnectorError && err.code === 'TRANSIENT' && !/aborted/.test(err.message)) {
        err.message += '; without rpcbind, give the MOUNT port as options.mount_port';
      }
      throw err;
    });
    const port = reply.u32();
    if (port === 0) throw new ConnectorError('UNSUPPORTED', `rpcbind on ${rpc.where} knows no MOUNT v3 service over TCP (is ${base.host} an NFSv3 server?)`);
    return port;
  } finally {
    await rpc.close();
  }
}

/** What MNT gave for a connection's base path: the export's root handle and the path below it. */
export interface Mounted {
  /** The export that was mounted (a prefix of the base path). */
  exportPath: string;
  root: FileHandle;
  /** Segments of the base path below the export, to LOOKUP one by one. */
  below: string[];
}

/**
 * Mounts the longest prefix of `path` the server exports: MNT of `path` itself, then of each
 * shorter prefix. Servers differ on subdirectories of an export (Linux knfsd mounts them,
 * ganesha only the export itself), and EXPORT lists are often hidden, so asking is the one
 * portable way. A refusal (MNT3ERR_ACCES) is remembered and reported when no prefix mounts.
 */
export async function mountBase(base: Base, port: number, path: string, signal?: AbortSignal): Promise<Mounted> {
  const rpc = new RpcClient({ ...base, port, listener: 'a MOUNT server' });
  const segments = path.split('/').filter(Boolean);
  let refused: string | null = null;
  try {
    for (let n = segments.length; n >= 0; n--) {
      const candidate = `/${segments.slice(0, n).join('/')}`;
      const reply = await rpc.call(MOUNT_PROGRAM, MOUNT_V3, MOUNTPROC3_MNT, [new XdrWriter(64).string(candidate).finish()], { signal });
      const status = reply.u32();
      if (status === 0) return { exportPath: candidate, root: Buffer.from(handle(reply)), below: segments.slice(n) };
      const state = MOUNT_STATES[status] ?? `mountstat3 ${status}`;
      if (status === 1 || status === 13) refused ??= `${candidate} (${state})`;
      else if (status === 5 || status === 10006) throw new ConnectorError('TRANSIENT', `MOUNT ${candidate} on ${rpc.where} failed on the server (${state})`);
    }
  } finally {
    await rpc.close();
  }
  if (refused) {
    throw new ConnectorError('PERMISSION', `${base.host} refuses to export ${refused} to this client as uid ${base.auth.uid} gid ${base.auth.gid} (check the export's client list and security flavor)`);
  }
  throw new ConnectorError('NOT_FOUND', `${base.host} exports nothing that contains ${path} (no prefix of it could be mounted)`);
}

function handle(reply: XdrReader): Buffer {
  return reply.opaque(64);
}
