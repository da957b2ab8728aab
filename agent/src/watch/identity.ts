import type { ConnectionType } from '@xfer/shared';
import type { Entry } from '../connectors/types.js';

/**
 * Connection types whose listing carries an entity tag that changes with the content: there the
 * ETag alone is a file's version (docs/agent.md "Watching a folder", table of identities). S3 and
 * its interop stores (r2, gcs) and Azure Blob give one on every object; WebDAV (`getetag`) and
 * OneDrive (`eTag`) where the server sends one.
 */
const ETAG_TYPES: ReadonlySet<ConnectionType> = new Set(['s3', 'r2', 'gcs', 'blob', 'webdav', 'onedrive']);

/**
 * The version identity of a listed file: two listings that give the same string saw the same
 * version. `etag:<tag>` where the type has entity tags and the entry carries one; otherwise
 * `size:<bytes>:mtime:<ms>` (size and modification time, at the store's precision: whole seconds
 * on sftp and ftp), or `size:<bytes>` where the store gives no time. The string is what a report
 * names as `version` (the control plane can keep it to tell versions apart).
 */
export function versionIdentity(type: ConnectionType, entry: Entry): string {
  if (ETAG_TYPES.has(type) && entry.etag) return `etag:${entry.etag}`;
  const mtime = entry.modifiedAt?.getTime();
  return mtime === undefined || Number.isNaN(mtime) ? `size:${entry.size}` : `size:${entry.size}:mtime:${mtime}`;
}
