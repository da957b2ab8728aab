import { createHash } from 'node:crypto';
import type { ConnectionSettings } from '@xfer/shared';
import { ConnectorError } from '../types.js';

/** The Microsoft identity platform of the global cloud (options.login_host overrides it). */
export const DEFAULT_LOGIN_HOST = 'login.microsoftonline.com';
/**
 * What the connector asks for: `offline_access` so that the token endpoint keeps answering with
 * refresh tokens, `Files.ReadWrite.All` for every drive the signed-in user can reach.
 */
export const SCOPE = 'offline_access https://graph.microsoft.com/Files.ReadWrite.All';

/** What the onedrive connector needs from a connection, checked once at construction. */
export interface OnedriveConfig {
  /** Connection id: the key of the token cache shared by every connector of this connection in the process. */
  connectionId: string;
  /** `https://host[:port]` of Microsoft Graph. */
  graphOrigin: string;
  /** `/v1.0/me/drive` or `/v1.0/drives/{drive_id}`. */
  drivePath: string;
  /** `https://login_host/{tenant}/oauth2/v2.0/token`. */
  tokenUrl: string;
  /** Normalized absolute folder in the drive (`/` for the drive's root), no trailing slash. */
  basePath: string;
  clientId: string;
  /** Never logged or put in a message. */
  clientSecret: string;
  /** The refresh token the connection holds now; never logged or put in a message. */
  refreshToken: string;
  /** `host:port` of Graph and of the login host, for messages. */
  endpoint: string;
  loginEndpoint: string;
  /**
   * SHA-256 of Graph's origin, the drive, the token URL, the app's id and secret and the refresh
   * token: two connections with equal accounts are the same user on the same drive, so a
   * server-side copy between them needs no authority the source connection lacks
   * (docs/connectors.md "Server-side copies"). Compared in constant time; never shown.
   */
  account: Buffer;
}

/**
 * Reads a onedrive connection: `host` (Graph, default graph.microsoft.com), `port` (443), `path`
 * (folder in the drive, default `/`), `credentials.client_id/client_secret/tenant_id/refresh_token`,
 * `options.drive_id` and `options.login_host` (`host[:port]`, default login.microsoftonline.com).
 * Always HTTPS: there is no setting that turns TLS or its verification off. Missing credentials
 * are AUTH, before any request.
 */
export function onedriveConfig(settings: ConnectionSettings): OnedriveConfig {
  const creds = settings.credentials;
  const field = (name: string): string => {
    const value = creds[name];
    if (typeof value !== 'string' || value === '') throw new ConnectorError('AUTH', `onedrive connections need credentials.${name}`);
    return value;
  };
  const clientId = field('client_id');
  const clientSecret = field('client_secret');
  const tenant = field('tenant_id');
  const refreshToken = field('refresh_token');
  const rawHost = settings.host || 'graph.microsoft.com';
  const host = rawHost.includes(':') && !rawHost.startsWith('[') ? `[${rawHost}]` : rawHost;
  const port = settings.port || 443;
  const loginHost = typeof settings.options?.login_host === 'string' && settings.options.login_host ? settings.options.login_host : DEFAULT_LOGIN_HOST;
  const loginOrigin = new URL(`https://${loginHost}`);
  const driveId = typeof settings.options?.drive_id === 'string' && settings.options.drive_id ? settings.options.drive_id : null;
  const basePath = `/${(settings.path ?? '/').split('/').filter((s) => s !== '' && s !== '.').join('/')}`;
  const graphOrigin = `https://${host}${port === 443 ? '' : `:${port}`}`;
  const drivePath = driveId ? `/v1.0/drives/${encodeURIComponent(driveId)}` : '/v1.0/me/drive';
  const tokenUrl = `${loginOrigin.origin}/${encodeURIComponent(tenant)}/oauth2/v2.0/token`;
  return {
    connectionId: settings.id,
    graphOrigin,
    drivePath,
    tokenUrl,
    basePath,
    clientId,
    clientSecret,
    refreshToken,
    endpoint: `${host}:${port}`,
    loginEndpoint: `${loginOrigin.hostname}:${loginOrigin.port || 443}`,
    account: createHash('sha256').update(JSON.stringify(['onedrive', graphOrigin, drivePath, tokenUrl, clientId, clientSecret, refreshToken])).digest(),
  };
}
