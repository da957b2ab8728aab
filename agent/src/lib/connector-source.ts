import type { ConnectionSettings, ConnectionType } from '@xfer/shared';
import type { AgentAccess } from '../connectors/access.js';
import { connectorTypes, createConnector } from '../connectors/index.js';
import type { KeptTimes } from '../connectors/kept-times.js';
import type { Connector, ConnectorContext } from '../connectors/types.js';

/**
 * Where the agent gets its connectors: the registry in production; tests hand in their own
 * (e.g. the fs connector for a connection type) without touching the registry.
 */
export interface ConnectorSource {
  /** Connection types announced in `hello`. */
  types(): ConnectionType[];
  /** A connector for the settings; throws ConnectorError('UNSUPPORTED') for a type this agent lacks. */
  create(settings: ConnectionSettings, context?: ConnectorContext): Connector | Promise<Connector>;
}

export const registryConnectors: ConnectorSource = { types: connectorTypes, create: createConnector };

/**
 * `source` with every connector it creates told where to report credentials the service rotated
 * (ConnectorContext.credentialsChanged): to `report`, with the connection the connector serves;
 * what the agent's owner lets it touch (`access`), for jobs and connection tests alike; and the
 * agent's index of kept modification times, where it has one.
 */
export function reportingCredentials(
  source: ConnectorSource,
  report: (settings: ConnectionSettings, credentials: Record<string, string>, previous: Record<string, string>) => void,
  access: AgentAccess,
  keptTimes?: KeptTimes | null,
): ConnectorSource {
  return {
    types: () => source.types(),
    create: (settings) => source.create(settings, {
      access, credentialsChanged: (credentials, previous) => report(settings, credentials, previous), ...(keptTimes ? { keptTimes } : {}),
    }),
  };
}
