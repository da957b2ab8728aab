import type { ConnectionSettings } from '@xfer/shared';
import { ConnectorError } from '../types.js';

/** What the WebDAV connector needs from a connection, checked once at construction. */
export interface WebdavConfig {
  /** `http(s)://host:port`, without a path. */
  origin: string;
  /** Normalized absolute base path on the server (`/` or `/dav/in`, no trailing slash). */
  basePath: string;
  /** `Basic ...`; never logged or put in a message. */
  authorization: string;
  /** `host:port` for messages. */
  endpoint: string;
}

/**
 * Reads a webdav connection: `host` (required), `port` (default 443), `path` (base collection,
 * default `/`), `credentials.username`/`password` (HTTP Basic), `options.secure` (default true:
 * HTTPS; false: plain HTTP). Missing credentials are AUTH, before any request.
 */
export function webdavConfig(settings: ConnectionSettings): WebdavConfig {
  const creds = settings.credentials;
  const username = typeof creds.username === 'string' ? creds.username : '';
  const password = typeof creds.password === 'string' ? creds.password : '';
  if (!username) throw new ConnectorError('AUTH', 'webdav connections need credentials.username');
  // RFC 7617: user-id and password joined by ':', so a ':' in the user name cannot be sent.
  if (username.includes(':')) throw new ConnectorError('AUTH', "credentials.username must not contain ':' (HTTP Basic cannot send it)");
  if (!settings.host) throw new ConnectorError('CONFLICT', 'webdav connections need a host');
  const secure = settings.options?.secure !== false;
  const port = settings.port || 443;
  const host = settings.host.includes(':') && !settings.host.startsWith('[') ? `[${settings.host}]` : settings.host;
  const basePath = `/${(settings.path ?? '/').split('/').filter((s) => s !== '' && s !== '.').join('/')}`;
  return {
    origin: `${secure ? 'https' : 'http'}://${host}:${port}`,
    basePath: basePath === '/' ? '/' : basePath,
    authorization: `Basic ${Buffer.from(`${username}:${password}`, 'utf8').toString('base64')}`,
    endpoint: `${host}:${port}`,
  };
}
