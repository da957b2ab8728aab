import { InflightWindow } from '@xfer/storage';
import type { SFTPWrapper, Stats } from 'ssh2';
import { abortedError } from '../aborted.js';
import { shownPath } from '../paths.js';
import { ConnectorError, type Entry } from '../types.js';
import { SFTP_STATUS, sftpStatus } from './sftp.errors.js';
import * as ops from './sftp.ops.js';

/**
 * copy-data requests in flight. OpenSSH's sftp-server runs one request at a time, so they are done
 * one after another; the second one queued keeps the server copying while the first's answer travels.
 */
const COPY_DATA_DEPTH = 2;

/**
 * Whether an open file is the version that was listed: a regular file of the listed size and
 * modification time (whole seconds, all SFTP v3 has). A rewrite that keeps both within the same
 * second is not seen, as a `size_mtime` comparison would not see it (docs/connectors.md
 * "Server-side copies").
 */
export function isListedVersion(stats: Stats, entry: Entry): boolean {
  if (!stats.isFile() || stats.size !== entry.size) return false;
  return entry.modifiedAt === undefined || stats.mtime * 1000 === entry.modifiedAt.getTime();
}

/** The CONFLICT a source rewritten since it was listed fails the copy with (`when` says when it was seen). */
export function sourceChanged(rel: string, stats: Stats, entry: Entry, when: string): ConnectorError {
  const what = (size: number, mtime: Date | undefined) => `${size} bytes${mtime ? ` modified ${mtime.toISOString()}` : ''}`;
  const now = stats.isFile() ? what(stats.size, new Date(stats.mtime * 1000)) : 'no longer a regular file';
  return new ConnectorError('CONFLICT', `copy ${shownPath(rel)}: source changed since it was listed (${when}): ${now}, listed ${what(entry.size, entry.modifiedAt)}`);
}

/**
 * Has the server copy `size` bytes of the open file `from` to the open file `to` (both handles of
 * this channel: copy-data works within one server process), `chunkBytes` per request, at most
 * COPY_DATA_DEPTH in flight; checks `signal` between requests. A source shorter than `size` (cut
 * since it was listed) is a CONFLICT. Returns only once no request is in flight, so the caller may
 * close and remove the files.
 */
export async function copyRange(
  sftp: SFTPWrapper, from: Buffer, to: Buffer, size: number,
  o: { chunkBytes: number; signal?: AbortSignal; rel: string },
): Promise<void> {
  const window = new InflightWindow(COPY_DATA_DEPTH);
  try {
    for (let offset = 0; offset < size; offset += o.chunkBytes) {
      if (o.signal?.aborted) throw abortedError('copy', o.rel, o.signal);
      window.add(ops.copyData(sftp, from, offset, Math.min(o.chunkBytes, size - offset), to, offset));
      await window.slot();
    }
    await window.drain();
  } catch (err) {
    if (sftpStatus(err) === SFTP_STATUS.EOF) {
      throw new ConnectorError('CONFLICT', `copy ${shownPath(o.rel)}: source changed since it was listed: it ends before its listed ${size} bytes`, { cause: err });
    }
    throw err;
  } finally {
    await window.settle();
  }
}
