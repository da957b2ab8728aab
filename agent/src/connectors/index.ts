import type { ConnectionType } from '@xfer/shared';
import { ConnectorError, type Connector, type ConnectorContext, type ConnectorFactory } from './types.js';

export * from './types.js';
export * from './paths.js';

const s3 = async () => (await import('./s3/s3.connector.js')).createS3Connector;

/**
 * The connector of each connection type this agent has; `hello.connector_types` is its keys.
 * A new type: one folder under connectors/, one line here. Each is loaded on first use, so an
 * agent holds the libraries of the types it serves only (the AWS SDK alone is 13 MiB of memory).
 */
const FACTORIES: Partial<Record<ConnectionType, () => Promise<ConnectorFactory>>> = {
  sftp: async () => (await import('./sftp/sftp.connector.js')).createSftpConnector,
  ftp: async () => (await import('./ftp/ftp.connector.js')).createFtpConnector,
  s3,
  r2: s3,
  gcs: s3,
  blob: async () => (await import('./blob/blob.connector.js')).createBlobConnector,
  fileshare: async () => (await import('./fileshare/fileshare.connector.js')).createFileshareConnector,
  webdav: async () => (await import('./webdav/webdav.connector.js')).createWebdavConnector,
  nfs: async () => (await import('./nfs/nfs.connector.js')).createNfsConnector,
  smb: async () => (await import('./smb/smb.connector.js')).createSmbConnector,
  onedrive: async () => (await import('./onedrive/onedrive.connector.js')).createOnedriveConnector,
};

/** Connection types this agent can serve. */
export function connectorTypes(): ConnectionType[] {
  return Object.keys(FACTORIES) as ConnectionType[];
}

/** A connector for `settings`; UNSUPPORTED when this agent has none for its type. */
export async function createConnector(settings: Parameters<ConnectorFactory>[0], context?: ConnectorContext): Promise<Connector> {
  const load = FACTORIES[settings.type];
  if (!load) throw new ConnectorError('UNSUPPORTED', `this agent has no connector for ${settings.type} connections`);
  return (await load())(settings, context);
}
