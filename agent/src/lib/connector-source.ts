import type { ConnectionSettings, ConnectionType } from '@xfer/shared';
import { connectorTypes, createConnector } from '../connectors/index.js';
import type { Connector } from '../connectors/types.js';

/**
 * Where the agent gets its connectors: the registry in production; tests hand in their own
 * (e.g. the fs connector for a connection type) without touching the registry.
 */
export interface ConnectorSource {
  /** Connection types announced in `hello`. */
  types(): ConnectionType[];
  /** A connector for the settings; throws ConnectorError('UNSUPPORTED') for a type this agent lacks. */
  create(settings: ConnectionSettings): Connector | Promise<Connector>;
}

export const registryConnectors: ConnectorSource = { types: connectorTypes, create: createConnector };
