import { appendFileSync, mkdirSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { ConnectionSettings } from '@xfer/shared';
import { createBlobConnector } from '../../src/connectors/blob/blob.connector.js';
import { createS3Connector } from '../../src/connectors/s3/s3.connector.js';
import { createWebdavConnector } from '../../src/connectors/webdav/webdav.connector.js';
import { createSftpConnector } from '../../src/connectors/sftp/sftp.connector.js';
import type { Connector } from '../../src/connectors/types.js';
import { uniqueName } from '../conformance/helpers.js';
import { RawBlob } from '../conformance/blob.raw.js';
import { RawS3 } from '../conformance/s3.raw.js';
import { RawWebdav } from '../conformance/webdav.raw.js';

/**
 * A folder of its own on one of the real test servers (jest's global setup starts them), the
 * connector that lists it, and ways to change what is in it that do not go through that connector.
 */
export interface WatchStore {
  readonly connector: Connector;
  /** Creates or replaces a file. */
  put(rel: string, data: string | Buffer): Promise<void>;
  remove(rel: string): Promise<void>;
  cleanup(): Promise<void>;
}

const env = process.env;

/**
 * The OpenSSH sshd's directory: it serves a directory of this machine, so files are written (and
 * grown, and their times set) on disk, as another program on the server would, and listed over SFTP.
 */
export class SftpWatchStore implements WatchStore {
  readonly connector: Connector;
  readonly dir: string;
  /** The connection's settings, as a watcher assigned to an agent carries them. */
  readonly settings: ConnectionSettings;

  constructor() {
    this.dir = join(env.XFER_TEST_SFTP_ROOT!, uniqueName('watch'));
    mkdirSync(this.dir, { recursive: true });
    this.settings = {
      id: '000000000000000000000015', name: 'sftp watch', type: 'sftp', host: env.XFER_TEST_SFTP_HOST!, port: Number(env.XFER_TEST_SFTP_PORT),
      path: this.dir, options: {}, agent_id: null, credentials: { username: env.XFER_TEST_SFTP_USER!, password: env.XFER_TEST_SFTP_PASSWORD! },
    };
    this.connector = createSftpConnector(this.settings);
  }

  async put(rel: string, data: string | Buffer): Promise<void> {
    mkdirSync(dirname(join(this.dir, rel)), { recursive: true });
    writeFileSync(join(this.dir, rel), data);
  }

  append(rel: string, data: string | Buffer): void {
    appendFileSync(join(this.dir, rel), data);
  }

  /** Sets the modification time (seconds since the epoch), as `touch -d` would. */
  setMtime(rel: string, seconds: number): void {
    utimesSync(join(this.dir, rel), seconds, seconds);
  }

  async remove(rel: string): Promise<void> {
    rmSync(join(this.dir, rel), { force: true });
  }

  async cleanup(): Promise<void> {
    await this.connector.close();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** A store written through one of the conformance suites' plain clients (not the connector). */
abstract class RawClientStore {
  protected constructor(readonly connector: Connector, protected readonly raw: { put(rel: string, data: Buffer): Promise<void>; destroy(): Promise<void> }) {}

  async put(rel: string, data: string | Buffer): Promise<void> {
    await this.raw.put(rel, Buffer.from(data));
  }

  async cleanup(): Promise<void> {
    await this.connector.close();
    await this.raw.destroy();
  }
}

/** A bucket of its own on versitygw, written through a plain S3 client (RawS3). */
export class S3WatchStore extends RawClientStore implements WatchStore {
  declare protected readonly raw: RawS3;

  private constructor(readonly bucket: string) {
    super(createS3Connector(S3WatchStore.settingsOf(bucket)), new RawS3({ endpoint: env.XFER_TEST_S3_ENDPOINT!, accessKeyId: env.XFER_TEST_S3_ACCESS_KEY!, secretAccessKey: env.XFER_TEST_S3_SECRET_KEY! }, bucket, ''));
  }

  /** The connection's settings, as a watcher assigned to an agent carries them. */
  get settings(): ConnectionSettings {
    return S3WatchStore.settingsOf(this.bucket);
  }

  private static settingsOf(bucket: string): ConnectionSettings {
    return {
      id: '000000000000000000000016', name: 's3 watch', type: 's3', host: env.XFER_TEST_S3_HOST!, port: Number(env.XFER_TEST_S3_PORT), path: `/${bucket}`,
      options: { secure: false }, agent_id: null,
      credentials: { access_key_id: env.XFER_TEST_S3_ACCESS_KEY!, secret_access_key: env.XFER_TEST_S3_SECRET_KEY!, region: 'us-east-1' },
    };
  }

  static async create(): Promise<S3WatchStore> {
    const store = new S3WatchStore(uniqueName('watch'));
    await store.raw.createBucket();
    return store;
  }

  async remove(rel: string): Promise<void> {
    await this.raw.remove(rel);
  }
}

/** A container of its own on Azurite, written through a plain Blob client (RawBlob). */
export class BlobWatchStore extends RawClientStore implements WatchStore {
  declare protected readonly raw: RawBlob;

  private constructor(container: string) {
    const connectionString = env.XFER_TEST_BLOB_CONNECTION_STRING!;
    super(createBlobConnector({
      id: '000000000000000000000017', name: 'blob watch', type: 'blob', host: null, port: 443, path: `/${container}`,
      options: {}, agent_id: null, credentials: { connection_string: connectionString },
    }), new RawBlob(connectionString, container, ''));
  }

  static async create(): Promise<BlobWatchStore> {
    const store = new BlobWatchStore(uniqueName('watch'));
    await store.raw.createContainer();
    return store;
  }

  async remove(rel: string): Promise<void> {
    await this.raw.remove(rel);
  }
}

/**
 * A collection of its own on one of the WebDAV test servers (`rclone serve webdav`, or Apache
 * mod_dav below its prefix), written through a plain client (RawWebdav). No `remove`: the tests
 * that use it only add and replace files.
 */
export class WebdavWatchStore extends RawClientStore {
  declare protected readonly raw: RawWebdav;

  private constructor(server: 'rclone' | 'apache', base: string) {
    const v = server === 'rclone'
      ? { host: env.XFER_TEST_WEBDAV_HOST!, port: Number(env.XFER_TEST_WEBDAV_PORT), username: env.XFER_TEST_WEBDAV_USER!, password: env.XFER_TEST_WEBDAV_PASSWORD! }
      : { host: env.XFER_TEST_APACHE_DAV_HOST!, port: Number(env.XFER_TEST_APACHE_DAV_PORT), username: env.XFER_TEST_APACHE_DAV_USER!, password: env.XFER_TEST_APACHE_DAV_PASSWORD! };
    super(createWebdavConnector({
      id: '000000000000000000000018', name: 'webdav watch', type: 'webdav', host: v.host, port: v.port, path: base,
      options: { secure: false }, agent_id: null, credentials: { username: v.username, password: v.password },
    }), new RawWebdav({ url: `http://${v.host}:${v.port}`, username: v.username, password: v.password, base }));
  }

  static async create(server: 'rclone' | 'apache'): Promise<WebdavWatchStore> {
    const prefix = server === 'rclone' ? '' : env.XFER_TEST_APACHE_DAV_PREFIX!;
    const store = new WebdavWatchStore(server, `${prefix}/${uniqueName('watch')}`);
    await store.raw.mkdirs();
    return store;
  }
}
