import type { FileEntryWithStats, SFTPWrapper, Stats } from 'ssh2';

// Promise forms of the ssh2 SFTP requests the connector uses. Errors are ssh2's own (with the
// SFTP status as a numeric `code`); the connector maps them with sftpError.

type Callback<T> = (err: Error | null | undefined, value: T) => void;

function call<T>(fn: (cb: Callback<T>) => void): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    try {
      fn((err, value) => (err ? reject(err) : resolve(value)));
    } catch (err) {
      // ssh2 throws synchronously when the channel is already closed.
      reject(err);
    }
  });
}

export const openFile = (sftp: SFTPWrapper, path: string, flags: 'r' | 'w' | 'w+') => call<Buffer>((cb) => sftp.open(path, flags, cb));
export const closeFile = (sftp: SFTPWrapper, handle: Buffer) => call<void>((cb) => sftp.close(handle, (err) => cb(err, undefined)));
export const fstat = (sftp: SFTPWrapper, handle: Buffer) => call<Stats>((cb) => sftp.fstat(handle, cb));
export const stat = (sftp: SFTPWrapper, path: string) => call<Stats>((cb) => sftp.stat(path, cb));
export const lstat = (sftp: SFTPWrapper, path: string) => call<Stats>((cb) => sftp.lstat(path, cb));
export const readdir = (sftp: SFTPWrapper, path: string) => call<FileEntryWithStats[]>((cb) => sftp.readdir(path, cb));
export const mkdir = (sftp: SFTPWrapper, path: string) => call<void>((cb) => sftp.mkdir(path, (err) => cb(err, undefined)));
export const rmdir = (sftp: SFTPWrapper, path: string) => call<void>((cb) => sftp.rmdir(path, (err) => cb(err, undefined)));
export const unlink = (sftp: SFTPWrapper, path: string) => call<void>((cb) => sftp.unlink(path, (err) => cb(err, undefined)));
export const futimes = (sftp: SFTPWrapper, handle: Buffer, time: Date) => call<void>((cb) => sftp.futimes(handle, time, time, (err) => cb(err, undefined)));
export const rename = (sftp: SFTPWrapper, from: string, to: string) => call<void>((cb) => sftp.rename(from, to, (err) => cb(err, undefined)));

/** Bytes read at `position` into a fresh buffer of `length` (fewer at the end of the file, 0 past it). */
export const readAt = (sftp: SFTPWrapper, handle: Buffer, length: number, position: number) =>
  call<Buffer>((cb) => sftp.read(handle, Buffer.allocUnsafe(length), 0, length, position, (err, bytesRead, buffer) => cb(err, buffer?.subarray(0, bytesRead))));

export const writeAt = (sftp: SFTPWrapper, handle: Buffer, data: Buffer, position: number) =>
  call<void>((cb) => sftp.write(handle, data, 0, data.length, position, (err) => cb(err, undefined)));

/**
 * copy-data (docs/connectors.md "Server-side copies"): the server copies `length` bytes (never
 * 0, which means "to the end of the file") from `from` at `fromOffset` to `to` at `toOffset`, both
 * handles of this channel's server process. Fails with EOF when the source ends first.
 */
export const copyData = (sftp: SFTPWrapper, from: Buffer, fromOffset: number, length: number, to: Buffer, toOffset: number) =>
  call<void>((cb) => sftp.ext_copy_data(from, fromOffset, length, to, toOffset, (err) => cb(err, undefined)));

/**
 * Whether the server announced the extension `name` at `version` in its VERSION packet: ssh2 keeps
 * the announced ones in `_extensions` (absent from its typings) and refuses, without sending, a
 * request of one that was not.
 */
export function announced(sftp: SFTPWrapper, name: string, version = '1'): boolean {
  return (sftp as unknown as { _extensions?: Record<string, string> })._extensions?.[name] === version;
}

/**
 * posix-rename@openssh.com (replaces the target atomically), or null when the server lacks the
 * extension, so the caller falls back to the plain rename, which refuses an existing target.
 */
export function posixRename(sftp: SFTPWrapper, from: string, to: string): Promise<void> | null {
  let settle!: (err: Error | null | undefined) => void;
  const done = new Promise<void>((resolve, reject) => (settle = (err) => (err ? reject(err) : resolve())));
  try {
    sftp.ext_openssh_rename(from, to, (err) => settle(err));
  } catch (err) {
    // ssh2 throws before sending anything when the server did not announce the extension.
    if (/does not support/.test((err as Error).message)) return null;
    settle(err as Error);
  }
  return done;
}
