import { ConnectorError } from '../types.js';
import type { RpcClient } from './rpc.client.js';
import { XdrError, XdrReader, XdrWriter } from './xdr.js';

/** NFS version 3 (RFC 1813): program, procedures, types, as far as the connector uses them. */
export const NFS_PROGRAM = 100003;
export const NFS_V3 = 3;
const PROC = { GETATTR: 1, SETATTR: 2, LOOKUP: 3, READ: 6, WRITE: 7, CREATE: 8, MKDIR: 9, REMOVE: 12, RMDIR: 13, RENAME: 14, READDIRPLUS: 17, FSINFO: 19, COMMIT: 21 } as const;
/** ftype3 */
export const NF3REG = 1;
export const NF3DIR = 2;
/** stable_how */
export const UNSTABLE = 0;
export const FILE_SYNC = 2;
/** Handles are at most 64 bytes (NFS3_FHSIZE); verifiers and cookie verifiers 8. */
const FHSIZE = 64;
const VERFSIZE = 8;
/** Files and directories the connector creates: rw-r--r-- and rwxr-xr-x, the server's umask aside. */
const FILE_MODE = 0o644;
const DIR_MODE = 0o755;

export type FileHandle = Buffer;

/** The parts of fattr3 the connector uses. */
export interface Attributes {
  type: number;
  mode: number;
  uid: number;
  gid: number;
  size: number;
  mtime: Date;
}

export interface DirEntry {
  name: string;
  /** name_attributes, when the server sent them (it may not). */
  attrs: Attributes | null;
  /** name_handle, when the server sent it. */
  fh: FileHandle | null;
}

export interface DirPage {
  entries: DirEntry[];
  cookie: Buffer;
  cookieverf: Buffer;
  eof: boolean;
}

export interface FsInfo {
  rtmax: number;
  rtpref: number;
  wtmax: number;
  wtpref: number;
  dtpref: number;
}

/** A reply whose nfsstat3 is not NFS3_OK; the connector maps it with the path it concerns (nfs.errors.ts). */
export class NfsStatusError extends Error {
  override name = 'NfsStatusError';
  constructor(
    readonly status: number,
    readonly proc: string,
  ) {
    super(`${proc} failed with nfsstat3 ${status}`);
  }
}

export const ZERO_VERF = Buffer.alloc(VERFSIZE);

type Signal = AbortSignal | undefined;

/**
 * The NFSv3 procedures over one RpcClient. Stateless: every call names its file handle. Calls
 * are idempotent and re-sent once after a dropped connection, except RENAME (a re-sent rename
 * whose first one succeeded would report the source missing).
 */
export class Nfs3 {
  constructor(readonly rpc: RpcClient) {}

  getattr(fh: FileHandle, signal: Signal): Promise<Attributes> {
    return this.call('GETATTR', fh, (w) => w, signal, fattr);
  }

  lookup(dir: FileHandle, name: string, signal: Signal): Promise<{ fh: FileHandle; attrs: Attributes | null }> {
    return this.call('LOOKUP', dir, (w) => w.string(name), signal, (r) => ({ fh: Buffer.from(r.opaque(FHSIZE)), attrs: postOpAttr(r) }));
  }

  /** One page of a directory from `cookie` (zero: the start), names with attributes and handles. */
  readdirplus(dir: FileHandle, cookie: Buffer, cookieverf: Buffer, signal: Signal): Promise<DirPage> {
    return this.call('READDIRPLUS', dir, (w) => w.fixed(cookie).fixed(cookieverf).u32(16 * 1024).u32(64 * 1024), signal, (r) => {
      postOpAttr(r);
      const verf = Buffer.from(r.fixed(VERFSIZE));
      const entries: DirEntry[] = [];
      let last = cookie;
      while (r.bool()) {
        r.u64(); // fileid
        const name = r.string();
        last = Buffer.from(r.fixed(8));
        const attrs = postOpAttr(r);
        const fh = r.bool() ? Buffer.from(r.opaque(FHSIZE)) : null;
        if (name !== '.' && name !== '..') entries.push({ name, attrs, fh });
      }
      return { entries, cookie: last, cookieverf: verf, eof: r.bool() };
    });
  }

  read(fh: FileHandle, offset: number, count: number, signal: Signal): Promise<{ data: Buffer; eof: boolean }> {
    return this.call('READ', fh, (w) => w.u64(offset).u32(count), signal, (r) => {
      postOpAttr(r);
      r.u32(); // count, repeated as the data's length
      const eof = r.bool();
      return { data: r.opaque(count), eof };
    });
  }

  /** Writes `data` at `offset`; resolves with how much the server took (it may take less) and its write verifier. */
  write(fh: FileHandle, offset: number, data: Buffer, stable: number, signal: Signal): Promise<{ count: number; verf: Buffer }> {
    const head = new XdrWriter(96).opaque(fh).u64(offset).u32(data.length).u32(stable).u32(data.length).finish();
    const padding = Buffer.alloc((4 - (data.length % 4)) % 4);
    return this.run('WRITE', [head, data, padding], signal, true, (r) => {
      skipWcc(r);
      const count = r.u32();
      r.u32(); // committed
      return { count, verf: Buffer.from(r.fixed(VERFSIZE)) };
    });
  }

  /** Flushes unstable writes of the whole file to stable storage; resolves with the write verifier. */
  commit(fh: FileHandle, signal: Signal): Promise<Buffer> {
    return this.call('COMMIT', fh, (w) => w.u64(0).u32(0), signal, (r) => {
      skipWcc(r);
      return Buffer.from(r.fixed(VERFSIZE));
    });
  }

  /** Sets the file's modification time (SET_TO_CLIENT_TIME, nanoseconds), nothing else; no guard. */
  async setMtime(fh: FileHandle, time: Date, signal: Signal): Promise<void> {
    const ms = time.getTime();
    const seconds = Math.floor(ms / 1000);
    await this.call('SETATTR', fh, (w) => sattr(w, { mtime: { seconds, nanoseconds: (ms - seconds * 1000) * 1e6 } }).bool(false), signal, (r) => skipWcc(r));
  }

  /** Creates or truncates the file `name` (UNCHECKED with size 0: an existing file is emptied, not refused). */
  async create(dir: FileHandle, name: string, signal: Signal): Promise<FileHandle> {
    const fh = await this.call('CREATE', dir, (w) => sattr(w.string(name).u32(0), { mode: FILE_MODE, size: 0 }), signal, postOpFh);
    return fh ?? (await this.lookup(dir, name, signal)).fh;
  }

  async mkdir(dir: FileHandle, name: string, signal: Signal): Promise<FileHandle> {
    const fh = await this.call('MKDIR', dir, (w) => sattr(w.string(name), { mode: DIR_MODE }), signal, postOpFh);
    return fh ?? (await this.lookup(dir, name, signal)).fh;
  }

  async remove(dir: FileHandle, name: string, signal: Signal): Promise<void> {
    await this.call('REMOVE', dir, (w) => w.string(name), signal, () => undefined);
  }

  async rmdir(dir: FileHandle, name: string, signal: Signal): Promise<void> {
    await this.call('RMDIR', dir, (w) => w.string(name), signal, () => undefined);
  }

  /** Renames, replacing a file at the target atomically (RFC 1813 3.3.14). Not re-sent after a drop: see the class comment. */
  async rename(fromDir: FileHandle, fromName: string, toDir: FileHandle, toName: string, signal: Signal): Promise<void> {
    await this.call('RENAME', fromDir, (w) => w.string(fromName).opaque(toDir).string(toName), signal, () => undefined, false);
  }

  fsinfo(root: FileHandle, signal: Signal): Promise<FsInfo> {
    return this.call('FSINFO', root, (w) => w, signal, (r) => {
      postOpAttr(r);
      const [rtmax, rtpref] = [r.u32(), r.u32()];
      r.u32(); // rtmult
      const [wtmax, wtpref] = [r.u32(), r.u32()];
      r.u32(); // wtmult
      return { rtmax, rtpref, wtmax, wtpref, dtpref: r.u32() };
    });
  }

  /** A call whose arguments start with a file handle, then whatever `args` writes. */
  private call<T>(proc: keyof typeof PROC, fh: FileHandle, args: (w: XdrWriter) => XdrWriter, signal: Signal, decode: (r: XdrReader) => T, retry = true): Promise<T> {
    return this.run(proc, [args(new XdrWriter(128).opaque(fh)).finish()], signal, retry, decode);
  }

  /** Sends, checks nfsstat3 (a failure's wcc or attributes are not needed), decodes the results. */
  private async run<T>(proc: keyof typeof PROC, parts: Buffer[], signal: Signal, retry: boolean, decode: (r: XdrReader) => T): Promise<T> {
    const r = await this.rpc.call(NFS_PROGRAM, NFS_V3, PROC[proc], parts, { signal, retry });
    try {
      const status = r.u32();
      if (status !== 0) throw new NfsStatusError(status, proc);
      return decode(r);
    } catch (err) {
      throw decodeError(err, this.rpc.where);
    }
  }
}

function decodeError(err: unknown, where: string): unknown {
  if (err instanceof XdrError) return new ConnectorError('TRANSIENT', `${where}: malformed NFS reply (${err.message})`, { cause: err });
  return err;
}

function fattr(r: XdrReader): Attributes {
  const type = r.u32();
  const mode = r.u32();
  r.u32(); // nlink
  const uid = r.u32();
  const gid = r.u32();
  const size = r.u64();
  r.skip(8 + 8 + 8 + 8); // used, rdev, fsid, fileid
  r.skip(8); // atime
  const seconds = r.u32();
  const nanoseconds = r.u32();
  r.skip(8); // ctime
  return { type, mode, uid, gid, size, mtime: new Date(seconds * 1000 + Math.floor(nanoseconds / 1e6)) };
}

function postOpAttr(r: XdrReader): Attributes | null {
  return r.bool() ? fattr(r) : null;
}

function postOpFh(r: XdrReader): FileHandle | null {
  return r.bool() ? Buffer.from(r.opaque(FHSIZE)) : null;
}

/** wcc_data: pre_op_attr (size, mtime, ctime) then post_op_attr. */
function skipWcc(r: XdrReader): void {
  if (r.bool()) r.skip(24);
  postOpAttr(r);
}

/** sattr3 with the mode, size and mtime given, nothing else changed (atime, and mtime unless given, left to the server). */
function sattr(w: XdrWriter, set: { mode?: number; size?: number; mtime?: { seconds: number; nanoseconds: number } }): XdrWriter {
  w.bool(set.mode !== undefined);
  if (set.mode !== undefined) w.u32(set.mode);
  w.bool(false).bool(false); // uid, gid: the caller's AUTH_SYS identity
  w.bool(set.size !== undefined);
  if (set.size !== undefined) w.u64(set.size);
  w.u32(0); // atime: DONT_CHANGE
  // mtime: SET_TO_CLIENT_TIME with an nfstime3, else DONT_CHANGE.
  return set.mtime ? w.u32(2).u32(set.mtime.seconds).u32(set.mtime.nanoseconds) : w.u32(0);
}
