import { createHash } from 'node:crypto';
import type { ShareFileClient } from '@azure/storage-file-share';
import type { WriteOptions, WriteResult } from '../types.js';
import { InflightWindow, PartReader } from '@xfer/storage';
import { errorName } from '../azure/azure.errors.js';
import type { FileshareTuning } from './fileshare.config.js';

/** Azure Files' largest file: 4 TiB. */
const MAX_FILE_BYTES = 4 * 1024 ** 4;

/**
 * Writes `body` into the file `file`, which must not be visible to readers yet (the engine writes
 * to a temporary name and renames: Azure Files has no atomic commit).
 *
 * A file is created with its size before ranges are put (Create File x-ms-content-length), and a
 * Put Range past the end is refused. With a size hint the file is created at that size; without
 * one (or when the body runs past it) it is grown with Set File Properties `growBytes` ahead of
 * the ranges; at the end it is cut to the bytes written. Each range (at most 4 MiB) carries its
 * Content-MD5, which the service checks; `queueRanges` are in flight while the next one is read.
 * Finally the file's Content-MD5 property is set to the MD5 of the whole, which `stat` and `list`
 * report. Missing parent directories are made (`makeParents`) when Create File finds none. On any
 * failure the caller deletes the file.
 */
export async function uploadFile(
  file: ShareFileClient,
  body: AsyncIterable<unknown>,
  options: WriteOptions & { makeParents: () => Promise<void> },
  tuning: FileshareTuning,
): Promise<WriteResult> {
  const { signal } = options;
  let allocated = Math.min(options.size ?? 0, MAX_FILE_BYTES);
  try {
    await file.create(allocated, { abortSignal: signal });
  } catch (err) {
    // Parents are created only when missing: one request less for every other file.
    if (errorName(err as object) !== 'ParentNotFound') throw err;
    await options.makeParents();
    await file.create(allocated, { abortSignal: signal });
  }
  const reader = new PartReader(body);
  const whole = createHash('md5');
  const window = new InflightWindow(tuning.queueRanges);
  let offset = 0;
  try {
    for (;;) {
      window.check();
      const range = await reader.nextBuffer(tuning.rangeBytes);
      if (!range) break;
      await window.slot();
      const end = offset + range.length;
      if (end > allocated) {
        // Growing never touches the ranges in flight, which all lie below the old size.
        allocated = Math.min(Math.max(end, allocated + tuning.growBytes), MAX_FILE_BYTES);
        if (end > allocated) throw new RangeError(`the file is larger than Azure Files' limit of ${MAX_FILE_BYTES} bytes`);
        await file.resize(allocated, { abortSignal: signal });
      }
      whole.update(range);
      const md5 = createHash('md5').update(range).digest();
      window.add(file.uploadRange(range, offset, range.length, { abortSignal: signal, contentMD5: md5 }));
      offset = end;
    }
    await window.drain();
  } finally {
    // Never leave a request running past the write, whatever happened.
    await window.settle();
    await reader.close();
  }
  signal?.throwIfAborted();
  if (allocated !== offset) await file.resize(offset, { abortSignal: signal });
  const md5 = whole.digest();
  // Set File Properties replaces every HTTP property: this one call sets the MD5 and clears the
  // rest, and sets the kept modification time (x-ms-file-last-write-time) after the last range.
  await file.setHttpHeaders({ fileContentMD5: md5 }, { abortSignal: signal, ...(options.modifiedAt ? { lastWriteTime: options.modifiedAt } : {}) });
  // Every byte went in a Put Range whose Content-MD5 the service checked; the ranges cover
  // [0, size) once each, and the size is the one set last.
  return { size: offset, checksum: { algorithm: 'md5', value: md5.toString('hex') }, storeVerified: 'md5-ranges' };
}
