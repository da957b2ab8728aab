import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { CreateBucketCommand } from '@aws-sdk/client-s3';
import { BlobServiceClient } from '@azure/storage-blob';
import { ShareServiceClient } from '@azure/storage-file-share';
import type { ConnectionType } from '@xfer/shared';
import { s3Client } from './trees.js';

/**
 * How e2e tests reach each connection type's test server of `npm run services`: a working
 * connection body for the API, the place it needs created first, and the same connection broken
 * in each way a user gets it wrong (host, port, credentials, base path) with the message
 * `POST /connections/:id/test` must give. One table, used by the ring and the connection tests.
 */
export type ConnectionBody = Record<string, unknown> & { type: ConnectionType; path: string };

export interface TypeFixture {
  /** A connection whose base path is the directory, bucket or container `place` (made by `prepare`). */
  body(place: string): ConnectionBody;
  /** Creates `place` on the server, empty. */
  prepare(place: string): Promise<void>;
  /** The connection with an unresolvable host, and with `port` (a closed one). */
  wrongHost(body: ConnectionBody): ConnectionBody;
  wrongPort(body: ConnectionBody, port: number): ConnectionBody;
  /** The connection with credentials the server refuses, and what the test must then say. */
  wrongCredentials(body: ConnectionBody): ConnectionBody;
  credentialsMessage: RegExp;
}

/** What every type must say for the other three mistakes. */
export const MESSAGES = { host: /cannot resolve/, port: /connection refused/, path: /does not exist/ } as const;

export const NO_SUCH_HOST = 'no-such-host.invalid';

/** What an agent needs in its environment to reach these servers: trust in the Graph fake's certificate. */
export const AGENT_ENV: Record<string, string> = { NODE_EXTRA_CA_CERTS: process.env.XFER_TEST_ONEDRIVE_CA_FILE! };

const env = process.env;

/** Host and port fields: the usual way a connection names its server. */
const hostPort = {
  wrongHost: (b: ConnectionBody): ConnectionBody => ({ ...b, host: NO_SUCH_HOST }),
  wrongPort: (b: ConnectionBody, port: number): ConnectionBody => ({ ...b, port }),
};

const withCredentials = (b: ConnectionBody, over: Record<string, unknown>): ConnectionBody =>
  ({ ...b, credentials: { ...(b.credentials as Record<string, unknown>), ...over } });

/** A directory under a service's root on this machine, owned by the service's login user. */
function localDir(root: string, owner: string | undefined) {
  return async (place: string) => {
    mkdirSync(join(root, place), { recursive: true });
    if (owner) spawnSync('chown', ['-R', `${owner}:`, join(root, place)]);
  };
}

const s3Family = (type: 's3' | 'r2' | 'gcs'): TypeFixture => ({
  body: (bucket) => ({
    type, host: env.XFER_TEST_S3_HOST, port: Number(env.XFER_TEST_S3_PORT), path: `/${bucket}`,
    options: type === 's3' ? { secure: false, force_path_style: true } : { secure: false },
    // versitygw signs for us-east-1 only; r2 and gcs would default to their own region names.
    credentials: { access_key_id: env.XFER_TEST_S3_ACCESS_KEY, secret_access_key: env.XFER_TEST_S3_SECRET_KEY, region: 'us-east-1' },
  }),
  prepare: async (bucket) => { await s3Client(env).send(new CreateBucketCommand({ Bucket: bucket })); },
  ...hostPort,
  wrongCredentials: (b) => withCredentials(b, { secret_access_key: 'not-the-secret-key' }),
  credentialsMessage: /secret access key is not accepted/,
});

/** Azure connections name their server in the connection string's `<Service>Endpoint`. */
const azureEndpoint = (service: 'Blob' | 'File', b: ConnectionBody, endpoint: string): ConnectionBody => withCredentials(b, {
  connection_string: String((b.credentials as Record<string, string>).connection_string)
    .replace(new RegExp(`${service}Endpoint=[^;]*`), `${service}Endpoint=${endpoint}`),
});

/** An Azure connection (blob, fileshare) of the emulator or fake whose settings start with `prefix`. */
const azure = (type: 'blob' | 'fileshare', prefix: string, create: (place: string) => Promise<void>): TypeFixture => {
  const service = type === 'blob' ? 'Blob' : 'File';
  const endpoint = env[`${prefix}_ENDPOINT`]!;
  return {
    body: (place) => ({ type, path: `/${place}`, credentials: { connection_string: env[`${prefix}_CONNECTION_STRING`] } }),
    prepare: create,
    wrongHost: (b) => azureEndpoint(service, b, endpoint.replace('127.0.0.1', NO_SUCH_HOST)),
    wrongPort: (b, port) => azureEndpoint(service, b, endpoint.replace(/:\d+/, `:${port}`)),
    wrongCredentials: (b) => withCredentials(b, {
      connection_string: String((b.credentials as Record<string, string>).connection_string)
        .replace(/AccountKey=[^;]*/, `AccountKey=${Buffer.from('not the account key').toString('base64')}`),
    }),
    credentialsMessage: /account name or key is not accepted/,
  };
};

export const FIXTURES: Partial<Record<ConnectionType, TypeFixture>> = {
  sftp: {
    body: (dir) => ({
      type: 'sftp', host: env.XFER_TEST_SFTP_HOST, port: Number(env.XFER_TEST_SFTP_PORT), path: `${env.XFER_TEST_SFTP_ROOT}/${dir}`,
      credentials: { username: env.XFER_TEST_SFTP_USER, password: env.XFER_TEST_SFTP_PASSWORD },
    }),
    prepare: localDir(env.XFER_TEST_SFTP_ROOT!, env.XFER_TEST_SFTP_USER),
    ...hostPort,
    wrongCredentials: (b) => withCredentials(b, { password: 'not-the-password' }),
    credentialsMessage: /authentication failed/,
  },
  ftp: {
    body: (dir) => ({
      type: 'ftp', host: env.XFER_TEST_FTP_HOST, port: Number(env.XFER_TEST_FTP_PORT), path: `${env.XFER_TEST_FTP_ROOT}/${dir}`,
      options: { secure: 'explicit', tls_cert_sha256: env.XFER_TEST_FTP_CERT_SHA256 },
      credentials: { username: env.XFER_TEST_FTP_USER, password: env.XFER_TEST_FTP_PASSWORD },
    }),
    prepare: localDir(env.XFER_TEST_FTP_ROOT!, env.XFER_TEST_FTP_USER),
    ...hostPort,
    wrongCredentials: (b) => withCredentials(b, { password: 'not-the-password' }),
    credentialsMessage: /login failed.*wrong username or password/,
  },
  webdav: {
    body: (dir) => ({
      type: 'webdav', host: env.XFER_TEST_WEBDAV_HOST, port: Number(env.XFER_TEST_WEBDAV_PORT), path: `/${dir}`, options: { secure: false },
      credentials: { username: env.XFER_TEST_WEBDAV_USER, password: env.XFER_TEST_WEBDAV_PASSWORD },
    }),
    // Through WebDAV, not on disk: rclone caches directory listings, so a directory made behind
    // its back may not be seen for minutes.
    prepare: async (dir) => {
      const auth = Buffer.from(`${env.XFER_TEST_WEBDAV_USER}:${env.XFER_TEST_WEBDAV_PASSWORD}`).toString('base64');
      const res = await fetch(`http://${env.XFER_TEST_WEBDAV_HOST}:${env.XFER_TEST_WEBDAV_PORT}/${dir}`, { method: 'MKCOL', headers: { authorization: `Basic ${auth}` } });
      if (res.status !== 201) throw new Error(`MKCOL /${dir}: ${res.status} ${await res.text()}`);
    },
    ...hostPort,
    wrongCredentials: (b) => withCredentials(b, { password: 'not-the-password' }),
    credentialsMessage: /authentication failed/,
  },
  blob: azure('blob', 'XFER_TEST_BLOB', async (container) => {
    await BlobServiceClient.fromConnectionString(env.XFER_TEST_BLOB_CONNECTION_STRING!).getContainerClient(container).create();
  }),
  fileshare: azure('fileshare', 'XFER_TEST_FILESHARE', async (share) => {
    await ShareServiceClient.fromConnectionString(env.XFER_TEST_FILESHARE_CONNECTION_STRING!).getShareClient(share).create();
  }),
  s3: s3Family('s3'),
  r2: s3Family('r2'),
  gcs: s3Family('gcs'),
  onedrive: {
    // The Graph fake serves the token endpoint too: login_host names it.
    body: (dir) => ({
      type: 'onedrive', host: env.XFER_TEST_ONEDRIVE_HOST, port: Number(env.XFER_TEST_ONEDRIVE_PORT), path: `/${dir}`,
      options: { login_host: `${env.XFER_TEST_ONEDRIVE_HOST}:${env.XFER_TEST_ONEDRIVE_PORT}` },
      credentials: {
        client_id: env.XFER_TEST_ONEDRIVE_CLIENT_ID, client_secret: env.XFER_TEST_ONEDRIVE_CLIENT_SECRET,
        tenant_id: env.XFER_TEST_ONEDRIVE_TENANT, refresh_token: env.XFER_TEST_ONEDRIVE_REFRESH_TOKEN,
      },
    }),
    prepare: localDir(env.XFER_TEST_ONEDRIVE_ROOT!, undefined),
    wrongHost: (b) => ({ ...b, host: NO_SUCH_HOST, options: { login_host: NO_SUCH_HOST } }),
    wrongPort: (b, port) => ({ ...b, port, options: { login_host: `${env.XFER_TEST_ONEDRIVE_HOST}:${port}` } }),
    wrongCredentials: (b) => withCredentials(b, { client_secret: 'not-the-client-secret' }),
    credentialsMessage: /client id or client secret is not accepted/,
  },
  smb: {
    // The base path starts with the share's name.
    body: (dir) => ({
      type: 'smb', host: env.XFER_TEST_SMB_HOST, port: Number(env.XFER_TEST_SMB_PORT), path: `/${env.XFER_TEST_SMB_SHARE}/${dir}`,
      credentials: { username: env.XFER_TEST_SMB_USER, password: env.XFER_TEST_SMB_PASSWORD },
    }),
    prepare: localDir(env.XFER_TEST_SMB_ROOT!, env.XFER_TEST_SMB_USER),
    ...hostPort,
    wrongCredentials: (b) => withCredentials(b, { password: 'not-the-password' }),
    credentialsMessage: /login failed for .*wrong username or password/,
  },
  nfs: {
    // uid 0 may enter the place; the wrong identity (uid 1000) may not: the export does not squash.
    body: (dir) => ({
      type: 'nfs', host: env.XFER_TEST_NFS_HOST, port: Number(env.XFER_TEST_NFS_PORT), path: `${env.XFER_TEST_NFS_EXPORT}/${dir}`,
      options: { mount_port: env.XFER_TEST_NFS_MOUNT_PORT }, credentials: { uid: 0, gid: 0 },
    }),
    prepare: async (dir) => {
      mkdirSync(join(env.XFER_TEST_NFS_ROOT!, dir), { recursive: true });
      chmodSync(join(env.XFER_TEST_NFS_ROOT!, dir), 0o700);
    },
    ...hostPort,
    wrongCredentials: (b) => ({ ...b, credentials: { uid: 1000, gid: 1000 } }),
    credentialsMessage: /permission denied as uid 1000 gid 1000/,
  },
};

/** A port nothing listens on (bound, then released). */
export async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((res) => server.listen(0, '127.0.0.1', res));
  const { port } = server.address() as { port: number };
  await new Promise((res) => server.close(res));
  return port;
}
