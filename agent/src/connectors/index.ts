import type { ConnectionType } from '@xfer/shared';
import { ConnectorError, type Connector, type ConnectorFactory } from './types.js';
import { createBlobConnector } from './blob/blob.connector.js';
import { createFtpConnector } from './ftp/ftp.connector.js';
import { createS3Connector } from './s3/s3.connector.js';
import { createSftpConnector } from './sftp/sftp.connector.js';
import { createWebdavConnector } from './webdav/webdav.connector.js';

export * from './types.js';
export * from './paths.js';

/**
 * The connector of each connection type this agent has; `hello.connector_types` is its keys.
 * A new type: one folder under connectors/, one line here.
 */
const FACTORIES: Partial<Record<ConnectionType, ConnectorFactory>> = {
  sftp: createSftpConnector,
  ftp: createFtpConnector,
  s3: createS3Connector,
  r2: createS3Connector,
  gcs: createS3Connector,
  blob: createBlobConnector,
  webdav: createWebdavConnector,
};

/** Connection types this agent can serve. */
export function connectorTypes(): ConnectionType[] {
  return Object.keys(FACTORIES) as ConnectionType[];
}

/** A connector for `settings`; UNSUPPORTED when this agent has none for its type. */
export function createConnector(settings: Parameters<ConnectorFactory>[0]): Connector {
  const factory = FACTORIES[settings.type];
  if (!factory) throw new ConnectorError('UNSUPPORTED', `this agent has no connector for ${settings.type} connections`);
  return factory(settings);
}
