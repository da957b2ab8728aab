import { readFileSync } from 'node:fs';
import type { ConnectionSettings, ConnectionType } from '@xfer/shared';
import { AgentAccess, type AccessRules } from '../../src/connectors/access.js';
import { connectorTypes, createConnector } from '../../src/connectors/index.js';
import type { Resolver } from '../../src/connectors/network-guard.js';
import { OnedriveConnector } from '../../src/connectors/onedrive/onedrive.connector.js';
import { ConnectorError, type Connector } from '../../src/connectors/types.js';

/**
 * The agent's host rules against the real servers of `npm run services` (all on loopback), for
 * every connection type the agent has: each is refused (PERMISSION, naming the host and the
 * setting) when its server's address is denied, whether given as an IP or as a name that
 * resolves to it, and when it points at a cloud metadata endpoint; the same settings pass the
 * guard when nothing is denied. So every socket a connector opens goes through the guard.
 */
const env = process.env;
const onedriveCa = readFileSync(env.XFER_TEST_ONEDRIVE_CA_FILE!);

const base = { id: '0000000000000000000000aa', name: 'access', agent_id: null, options: {} } as const;
/** The 127.0.0.1 of a connection string, an endpoint or a host field replaced by `host`. */
const at = (text: string, host: string) => text.replace(/127\.0\.0\.1|localhost/g, host.includes(':') ? `[${host}]` : host);

/** Settings reaching each type's test server, with its host replaced by `host`. */
const SETTINGS: Record<ConnectionType, (host: string) => ConnectionSettings> = {
  sftp: (host) => ({ ...base, type: 'sftp', host, port: Number(env.XFER_TEST_SFTP_PORT), path: env.XFER_TEST_SFTP_ROOT!, credentials: { username: env.XFER_TEST_SFTP_USER!, password: env.XFER_TEST_SFTP_PASSWORD! } }),
  ftp: (host) => ({ ...base, type: 'ftp', host, port: Number(env.XFER_TEST_FTP_PORT), path: env.XFER_TEST_FTP_ROOT!, options: { secure: 'none' }, credentials: { username: env.XFER_TEST_FTP_USER!, password: env.XFER_TEST_FTP_PASSWORD! } }),
  s3: (host) => s3('s3', host),
  r2: (host) => s3('r2', host),
  gcs: (host) => s3('gcs', host),
  blob: (host) => ({ ...base, type: 'blob', host: null, port: 443, path: '/access', credentials: { connection_string: at(env.XFER_TEST_BLOB_CONNECTION_STRING!, host) } }),
  fileshare: (host) => ({ ...base, type: 'fileshare', host: null, port: 443, path: '/access', credentials: { connection_string: at(env.XFER_TEST_FILESHARE_CONNECTION_STRING!, host) } }),
  webdav: (host) => ({ ...base, type: 'webdav', host, port: Number(env.XFER_TEST_WEBDAV_PORT), path: '/', options: { secure: false }, credentials: { username: env.XFER_TEST_WEBDAV_USER!, password: env.XFER_TEST_WEBDAV_PASSWORD! } }),
  nfs: (host) => ({ ...base, type: 'nfs', host, port: Number(env.XFER_TEST_NFS_PORT), path: env.XFER_TEST_NFS_EXPORT!, options: { mount_port: env.XFER_TEST_NFS_MOUNT_PORT! }, credentials: { uid: 0, gid: 0 } }),
  smb: (host) => ({ ...base, type: 'smb', host, port: Number(env.XFER_TEST_SMB_PORT), path: `/${env.XFER_TEST_SMB_SHARE!}`, credentials: { username: env.XFER_TEST_SMB_USER!, password: env.XFER_TEST_SMB_PASSWORD! } }),
  // The token endpoint (login_host) is dialed first, Graph after it: both on the same fake.
  onedrive: (host) => ({
    ...base, type: 'onedrive', host, port: Number(env.XFER_TEST_ONEDRIVE_PORT), path: '/',
    options: { login_host: `${host.includes(':') ? `[${host}]` : host}:${env.XFER_TEST_ONEDRIVE_PORT}` },
    credentials: { client_id: env.XFER_TEST_ONEDRIVE_CLIENT_ID!, client_secret: env.XFER_TEST_ONEDRIVE_CLIENT_SECRET!, tenant_id: env.XFER_TEST_ONEDRIVE_TENANT!, refresh_token: env.XFER_TEST_ONEDRIVE_REFRESH_TOKEN! },
  }),
};

function s3(type: ConnectionType, host: string): ConnectionSettings {
  return {
    ...base, type, host, port: Number(env.XFER_TEST_S3_PORT), path: '/access-bucket', options: { secure: false, force_path_style: true },
    credentials: { access_key_id: env.XFER_TEST_S3_ACCESS_KEY!, secret_access_key: env.XFER_TEST_S3_SECRET_KEY!, region: 'us-east-1' },
  };
}

function access(rules: Partial<AccessRules> = {}, resolver?: Resolver): AgentAccess {
  return new AgentAccess({ allowRoots: [], allowHosts: [], denyHosts: [], ...rules }, resolver);
}

/** The connector of the registry (as jobs and connection tests get theirs); onedrive also trusts the fake's CA. */
async function connector(settings: ConnectionSettings, agentAccess: AgentAccess): Promise<Connector> {
  if (settings.type === 'onedrive') return new OnedriveConnector(settings, { ca: onedriveCa, context: { access: agentAccess } });
  return createConnector(settings, { access: agentAccess });
}

/** How `test()` ended: 'ok', or the ConnectorError's code and message. */
async function outcome(settings: ConnectionSettings, agentAccess: AgentAccess): Promise<{ code: string; message: string }> {
  let c: Connector | undefined;
  try {
    c = await connector(settings, agentAccess);
    return { code: 'ok', message: await c.test() };
  } catch (err) {
    if (!(err instanceof ConnectorError)) throw err;
    return { code: err.code, message: err.message };
  } finally {
    await c?.close().catch(() => undefined);
  }
}

const LOOPBACK_DENIED = { denyHosts: ['127.0.0.0/8', '::1'] };
const types = connectorTypes();

describe('the agent host rules hold for every connector type, against the real servers', () => {
  test('the table covers every type the agent has', () => {
    expect(Object.keys(SETTINGS).sort()).toEqual([...types].sort());
  });

  test.each(types)('%s: reaches its server when nothing is denied (loopback is allowed by default)', async (type) => {
    const result = await outcome(SETTINGS[type]('127.0.0.1'), access());
    // ok, or the server's own answer that the test bucket, container or share does not exist.
    expect(['ok', 'NOT_FOUND']).toContain(result.code);
  });

  test.each(types)('%s: refused when the server address is in deny_hosts', async (type) => {
    const result = await outcome(SETTINGS[type]('127.0.0.1'), access(LOOPBACK_DENIED));
    expect(result).toEqual({ code: 'PERMISSION', message: expect.stringMatching(/the agent may not connect to 127\.0\.0\.1: 127\.0\.0\.1 is in "127\.0\.0\.0\/8" of the agent's --deny-hosts, XFER_AGENT_DENY_HOSTS or "deny_hosts"/) });
  });

  test.each(types)('%s: refused when a name resolves to a denied address (checked on the address connected to)', async (type) => {
    // The system resolver: localhost is 127.0.0.1 and/or ::1 on this host, both denied here.
    const result = await outcome(SETTINGS[type]('localhost'), access(LOOPBACK_DENIED));
    expect(result).toEqual({ code: 'PERMISSION', message: expect.stringMatching(/the agent may not connect to localhost \((127\.0\.0\.1|::1)\): .* is in "(127\.0\.0\.0\/8|::1)" of the agent's --deny-hosts/) });
  });

  test.each(types)('%s: a cloud metadata endpoint is refused by default', async (type) => {
    const result = await outcome(SETTINGS[type]('169.254.169.254'), access());
    expect(result).toEqual({ code: 'PERMISSION', message: expect.stringContaining('169.254.169.254 is a cloud metadata address, denied by default (allow it with --allow-hosts') });
  });

  test.each(types)('%s: a name re-pointed at a denied address after it was used is refused on the next connection (DNS rebinding)', async (type) => {
    // A resolver that answers like an attacker's DNS server: the test server, then the metadata endpoint.
    let rebound = false;
    let asked = 0;
    const rebinding: Resolver = async () => {
      asked++;
      return [{ address: rebound ? '169.254.169.254' : '127.0.0.1', family: 4 }];
    };
    const first = await outcome(SETTINGS[type]('files.rebind.test'), access({}, rebinding));
    expect(first.code).not.toBe('PERMISSION');
    expect(asked).toBeGreaterThan(0);
    rebound = true;
    const second = await outcome(SETTINGS[type]('files.rebind.test'), access({}, rebinding));
    expect(second).toEqual({ code: 'PERMISSION', message: expect.stringContaining('files.rebind.test (169.254.169.254): 169.254.169.254 is a cloud metadata address') });
  });
});
