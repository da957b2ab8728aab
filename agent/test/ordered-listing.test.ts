import { chmodSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { ConnectionSettings, FileFilter } from '@xfer/shared';
import { orderedListing } from '../src/copy/ordered-listing.js';
import { registryConnectors } from '../src/lib/connector-source.js';
import { uniqueName } from './conformance/helpers.js';
import { RawWebdav } from './conformance/webdav.raw.js';

/**
 * The ordered walker on each file store's real server (their non-recursive `list`, one directory
 * at a time) and on s3's key-ordered recursive listing: the same tree comes out in full-path byte
 * order on every one, so any two of them merge (copy/diff.ts). The trees are written on the
 * directories the test servers serve, except WebDAV's (see overWebdav).
 */
const env = process.env;
const PASS: FileFilter = { empty: true, prunes: false, includeFile: () => true, includeDirectory: () => true };
const TREE = ['a-b/x.txt', 'a/b/c.txt', 'a/z.txt', 'a0.txt', 'A.txt', 'é/f.txt', 'z z/日本.txt', 'b.txt'];
const EXPECTED = ['A.txt', 'a-b/', 'a-b/x.txt', 'a/', 'a/b/', 'a/b/c.txt', 'a/z.txt', 'a0.txt', 'b.txt', 'z z/', 'z z/日本.txt', 'é/', 'é/f.txt'];

/** Writes TREE in `dir` of a store and answers how to remove it again. */
type Plant = (dir: string) => Promise<() => Promise<void>>;
type Store = { name: string; plant: Plant; settings: (dir: string) => ConnectionSettings };
const credentials = (prefix: string) => ({ username: env[`${prefix}_USER`]!, password: env[`${prefix}_PASSWORD`]! });

/** On the directory a test server serves, through the file system. */
const onDisk = (root: () => string): Plant => async (dir) => {
  const base = join(root(), dir);
  for (const p of TREE) {
    mkdirSync(join(base, dirname(p)), { recursive: true });
    writeFileSync(join(base, p), p);
  }
  chmodSync(base, 0o755);
  return async () => rmSync(base, { recursive: true, force: true });
};

/**
 * Over WebDAV itself (the `webdav` npm client, not the connector under test): `rclone serve
 * webdav` keeps each directory listing for its --dir-cache-time (5 minutes) and sees only changes
 * made through it, so a folder made on disk after another test listed its parent was a 404
 * ("source path / does not exist") or missing from the listing.
 */
const overWebdav: Plant = async (dir) => {
  const raw = new RawWebdav({ url: `http://${env.XFER_TEST_WEBDAV_HOST}:${env.XFER_TEST_WEBDAV_PORT}`, ...credentials('XFER_TEST_WEBDAV'), base: `/${dir}` });
  await raw.mkdirs();
  for (const p of TREE) await raw.put(p, Buffer.from(p));
  return () => raw.destroy();
};

const base = { id: '000000000000000000000001', agent_id: null } as const;
const STORES: Store[] = [
  { name: 'sftp', plant: onDisk(() => env.XFER_TEST_SFTP_ROOT!), settings: (dir) => ({ ...base, name: 'sftp', type: 'sftp', host: env.XFER_TEST_SFTP_HOST!, port: Number(env.XFER_TEST_SFTP_PORT), path: join(env.XFER_TEST_SFTP_ROOT!, dir), options: {}, credentials: credentials('XFER_TEST_SFTP') }) },
  { name: 'smb', plant: onDisk(() => env.XFER_TEST_SMB_ROOT!), settings: (dir) => ({ ...base, name: 'smb', type: 'smb', host: env.XFER_TEST_SMB_HOST!, port: Number(env.XFER_TEST_SMB_PORT), path: `/${env.XFER_TEST_SMB_SHARE}/${dir}`, options: {}, credentials: credentials('XFER_TEST_SMB') }) },
  { name: 'nfs', plant: onDisk(() => env.XFER_TEST_NFS_ROOT!), settings: (dir) => ({ ...base, name: 'nfs', type: 'nfs', host: env.XFER_TEST_NFS_HOST!, port: Number(env.XFER_TEST_NFS_PORT), path: `${env.XFER_TEST_NFS_EXPORT}/${dir}`, options: { mount_port: env.XFER_TEST_NFS_MOUNT_PORT }, credentials: { uid: 0, gid: 0 } }) },
  { name: 'ftp', plant: onDisk(() => env.XFER_TEST_FTP_ROOT!), settings: (dir) => ({ ...base, name: 'ftp', type: 'ftp', host: env.XFER_TEST_FTP_HOST!, port: Number(env.XFER_TEST_FTP_PORT), path: `${env.XFER_TEST_FTP_ROOT}/${dir}`, options: { secure: 'none' }, credentials: credentials('XFER_TEST_FTP') }) },
  { name: 'webdav', plant: overWebdav, settings: (dir) => ({ ...base, name: 'webdav', type: 'webdav', host: env.XFER_TEST_WEBDAV_HOST!, port: Number(env.XFER_TEST_WEBDAV_PORT), path: `/${dir}`, options: { secure: false }, credentials: credentials('XFER_TEST_WEBDAV') }) },
];

describe.each(STORES)('orderedListing on $name', (store) => {
  test('yields the tree in full-path byte order, directories keyed name/, each directory listed once', async () => {
    const dir = uniqueName('ordered');
    const remove = await store.plant(dir);
    const connector = await registryConnectors.create(store.settings(dir));
    try {
      const keys: string[] = [];
      const listed: string[] = [];
      for await (const l of orderedListing({ connector, root: '/', filter: PASS, signal: new AbortController().signal, missing: 'fail', onListed: (d) => listed.push(d) })) keys.push(l.key);
      expect(keys).toEqual(EXPECTED);
      expect(listed.sort()).toEqual(['', 'a', 'a-b', 'a/b', 'z z', 'é'].sort());
    } finally {
      await connector.close();
      await remove();
    }
  });
});
