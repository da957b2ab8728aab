import { Type, type Static } from '@sinclair/typebox';
import { AgentLabel, Id, Name, PageQuery, StringEnum, Timestamp } from './common.js';

/** Storage endpoint kinds (api.md "Connection"). */
export const CONNECTION_TYPES = ['s3', 'r2', 'gcs', 'blob', 'fileshare', 'sftp', 'ftp', 'smb', 'nfs', 'webdav', 'onedrive'] as const;
export type ConnectionType = (typeof CONNECTION_TYPES)[number];
export const ConnectionTypeName = StringEnum(CONNECTION_TYPES);

export function isConnectionType(value: string): value is ConnectionType {
  return (CONNECTION_TYPES as readonly string[]).includes(value);
}

/** One credential field: its JSON type and, where its value ends up in a host name, a pattern. */
export interface CredentialFieldSpec {
  type: 'string' | 'integer';
  pattern?: RegExp;
}

/** One non-secret option: booleans, or strings from an enum or matching a pattern. */
export interface OptionSpec {
  type: 'boolean' | 'string';
  enum?: readonly string[];
  pattern?: RegExp;
  /** What the connector uses when the option is absent. */
  default?: boolean | string;
  description: string;
  /**
   * The option decides where the credentials go or how safely they travel (endpoint, TLS, a
   * pinned key): changing it needs the credentials again (docs/security.md "Credential binding").
   */
  bindsCredentials?: true;
}

/** What each connection type accepts and needs; the control plane validates with it, the CLI prompts with it. */
export interface ConnectionTypeSpec {
  /** Every credential field the type accepts: any other field is refused. */
  credentialFields: Readonly<Record<string, CredentialFieldSpec>>;
  /** The credentials must hold every field of at least one of these sets (`[]`: none needed). */
  credentialsRequired: readonly (readonly string[])[];
  /** Fields that must not be given together (two ways of saying the same thing). */
  credentialConflicts?: readonly (readonly [string, string])[];
  /** `host` must be given... */
  hostRequired: boolean;
  /** ...unless this credential field is, from which the host is derived (r2's account id). */
  hostFromCredential?: string;
  /** Host used when `host` is absent, or null when the connector derives it (AWS region, Azure account). */
  defaultHost: ((credentials: Readonly<Record<string, unknown>>) => string | null);
  /** Human description of where an absent host points (docs, CLI help). */
  defaultEndpoint: string;
  defaultPort: number;
  options: Readonly<Record<string, OptionSpec>>;
}

const str: CredentialFieldSpec = { type: 'string' };
const int: CredentialFieldSpec = { type: 'integer' };
const none = () => null;
const fixed = (host: string) => () => host;
const s3Keys = { access_key_id: str, secret_access_key: str, region: str };
const azureKeys = { connection_string: str, account_name: str, account_key: str };
const azureRequired = [['connection_string'], ['account_name', 'account_key']] as const;
const azureConflicts = [['connection_string', 'account_name'], ['connection_string', 'account_key']] as const;
const endpointSuffix: OptionSpec = {
  type: 'string', pattern: /^[a-z0-9]([a-z0-9.-]{0,250}[a-z0-9])?$/, default: 'core.windows.net', bindsCredentials: true,
  description: 'DNS suffix of the Azure cloud, for account_name + account_key (sovereign clouds)',
};
const userPassword = { username: str, password: str };
const s3Secure: OptionSpec = { type: 'boolean', default: true, bindsCredentials: true, description: 'HTTPS (true) or plain HTTP (false), for on-premises S3-compatible servers' };

/**
 * The per-type table (api.md credential table; decisions.md "Connections"). nfs takes no
 * credentials but may carry the AUTH_SYS `uid`/`gid` it presents.
 */
export const CONNECTION_TYPE_SPECS: Readonly<Record<ConnectionType, ConnectionTypeSpec>> = {
  s3: {
    credentialFields: s3Keys, credentialsRequired: [['access_key_id', 'secret_access_key']],
    hostRequired: false, defaultHost: none, defaultEndpoint: 'AWS S3 regional endpoint for the region', defaultPort: 443,
    options: {
      force_path_style: { type: 'boolean', default: false, bindsCredentials: true, description: 'Address buckets as host/bucket instead of bucket.host (MinIO and most S3-compatible stores)' },
      secure: s3Secure,
    },
  },
  r2: {
    credentialFields: { ...s3Keys, account_id: { type: 'string', pattern: /^[A-Za-z0-9-]{1,63}$/ } },
    credentialsRequired: [['access_key_id', 'secret_access_key']],
    hostRequired: true, hostFromCredential: 'account_id',
    defaultHost: (c) => (typeof c.account_id === 'string' ? `${c.account_id}.r2.cloudflarestorage.com` : null),
    defaultEndpoint: '<account_id>.r2.cloudflarestorage.com', defaultPort: 443, options: { secure: s3Secure },
  },
  gcs: {
    credentialFields: s3Keys, credentialsRequired: [['access_key_id', 'secret_access_key']],
    hostRequired: false, defaultHost: fixed('storage.googleapis.com'), defaultEndpoint: 'storage.googleapis.com (HMAC keys, XML API)',
    defaultPort: 443, options: { secure: s3Secure },
  },
  blob: {
    credentialFields: azureKeys, credentialsRequired: azureRequired, credentialConflicts: azureConflicts,
    hostRequired: false, defaultHost: none, defaultEndpoint: '<account>.blob.<endpoint_suffix>, or from the connection string',
    defaultPort: 443, options: { endpoint_suffix: endpointSuffix },
  },
  fileshare: {
    credentialFields: azureKeys, credentialsRequired: azureRequired, credentialConflicts: azureConflicts,
    hostRequired: false, defaultHost: none, defaultEndpoint: '<account>.file.<endpoint_suffix>, or from the connection string',
    defaultPort: 443, options: { endpoint_suffix: endpointSuffix },
  },
  sftp: {
    credentialFields: { username: str, password: str, private_key: str, passphrase: str },
    credentialsRequired: [['username', 'password'], ['username', 'private_key']],
    hostRequired: true, defaultHost: none, defaultEndpoint: 'none: host is required', defaultPort: 22,
    options: {
      host_key_sha256: {
        type: 'string', pattern: /^(SHA256:)?[A-Za-z0-9+/]{43}=?$/, bindsCredentials: true,
        description: 'Pinned host key fingerprint as printed by ssh-keygen -l (SHA256:...); the connection fails on any other key',
      },
    },
  },
  ftp: {
    credentialFields: userPassword, credentialsRequired: [['username', 'password']],
    hostRequired: true, defaultHost: none, defaultEndpoint: 'none: host is required', defaultPort: 21,
    options: {
      secure: { type: 'string', enum: ['none', 'explicit', 'implicit'], default: 'explicit', bindsCredentials: true, description: 'TLS: none (plain FTP), explicit (AUTH TLS) or implicit (FTPS)' },
      tls_cert_sha256: {
        type: 'string', pattern: /^([0-9A-Fa-f]{2}:){31}[0-9A-Fa-f]{2}$|^[0-9A-Fa-f]{64}$/, bindsCredentials: true,
        description: "Pinned SHA-256 fingerprint of the server's TLS certificate (openssl x509 -fingerprint -sha256), for self-signed servers; the connection fails on any other certificate",
      },
    },
  },
  smb: {
    credentialFields: { ...userPassword, domain: str }, credentialsRequired: [['username', 'password']],
    hostRequired: true, defaultHost: none, defaultEndpoint: 'none: host is required', defaultPort: 445, options: {},
  },
  nfs: {
    credentialFields: { uid: int, gid: int }, credentialsRequired: [],
    hostRequired: true, defaultHost: none, defaultEndpoint: 'none: host is required', defaultPort: 2049,
    options: {
      mount_port: { type: 'string', pattern: /^[1-9][0-9]{0,4}$/, bindsCredentials: true, description: 'TCP port of the MOUNT service (NFSv3 userspace mode); asked of rpcbind on port 111 when absent' },
      mount_path: { type: 'string', pattern: /^\/[^\u0000-\u001f\u007f]*$/, description: 'Absolute directory on the agent host where the export is mounted: the agent then works on that mount (path is below it) instead of speaking NFS itself' },
    },
  },
  webdav: {
    credentialFields: userPassword, credentialsRequired: [['username', 'password']],
    hostRequired: true, defaultHost: none, defaultEndpoint: 'none: host is required', defaultPort: 443,
    options: { secure: { type: 'boolean', default: true, bindsCredentials: true, description: 'HTTPS (true) or plain HTTP (false)' } },
  },
  onedrive: {
    credentialFields: { client_id: str, client_secret: str, tenant_id: str, refresh_token: str },
    credentialsRequired: [['client_id', 'client_secret', 'tenant_id', 'refresh_token']],
    hostRequired: false, defaultHost: fixed('graph.microsoft.com'), defaultEndpoint: 'graph.microsoft.com', defaultPort: 443,
    options: {
      drive_id: { type: 'string', pattern: /^[A-Za-z0-9!._-]{1,200}$/, description: 'Drive to use instead of the signed-in user\'s default drive' },
      login_host: {
        type: 'string', pattern: /^[A-Za-z0-9]([A-Za-z0-9.-]{0,250}[A-Za-z0-9])?(:[0-9]{1,5})?$/, default: 'login.microsoftonline.com', bindsCredentials: true,
        description: 'Host[:port] of the Microsoft identity platform (sovereign clouds: login.microsoftonline.us, login.chinacloudapi.cn); always HTTPS',
      },
    },
  },
};

const MAX_CREDENTIAL_LENGTH = 16_384;
const MAX_UNIX_ID = 4_294_967_295;
const HOST = /^([A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\]|[0-9A-Fa-f]*:[0-9A-Fa-f:.]*)$/;
const CONTROL = /[\u0000-\u001f\u007f]/;

/** Why `path` cannot be a base path, or null. */
export function basePathProblem(path: string): string | null {
  if (!path.startsWith('/')) return "path must start with '/'";
  if (CONTROL.test(path)) return 'path must not contain NUL or control characters';
  if (path.includes('\\')) return 'path must not contain backslashes';
  if (path.split('/').includes('..')) return "path must not contain '..' segments";
  return null;
}

/** A valid base path in one spelling: no empty or `.` segments, no trailing slash (`/` stays `/`). */
export function normalizeBasePath(path: string): string {
  return `/${path.split('/').filter((s) => s !== '' && s !== '.').join('/')}`;
}

function credentialsProblem(type: ConnectionType, spec: ConnectionTypeSpec, credentials: Readonly<Record<string, unknown>>): string | null {
  const given = Object.keys(credentials);
  const unknown = given.filter((k) => !(k in spec.credentialFields));
  if (unknown.length > 0) {
    const allowed = Object.keys(spec.credentialFields);
    return `credentials has unknown field${unknown.length > 1 ? 's' : ''} ${unknown.map((k) => `'${k}'`).join(', ')} for ${type} connections`
      + (allowed.length > 0 ? ` (allowed: ${allowed.join(', ')})` : ' (none are accepted)');
  }
  for (const [field, value] of Object.entries(credentials)) {
    const fieldSpec = spec.credentialFields[field]!;
    if (fieldSpec.type === 'integer') {
      if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value > MAX_UNIX_ID) {
        return `credentials.${field} must be an integer from 0 to ${MAX_UNIX_ID}`;
      }
    } else if (typeof value !== 'string' || value.length === 0 || value.length > MAX_CREDENTIAL_LENGTH) {
      return `credentials.${field} must be a non-empty string of at most ${MAX_CREDENTIAL_LENGTH} characters`;
    } else if (fieldSpec.pattern && !fieldSpec.pattern.test(value)) {
      return `credentials.${field} has an invalid format`;
    }
  }
  for (const [a, b] of spec.credentialConflicts ?? []) {
    if (a in credentials && b in credentials) return `credentials.${a} and credentials.${b} cannot be given together for ${type} connections`;
  }
  const sets = spec.credentialsRequired;
  if (sets.length === 0 || sets.some((set) => set.every((f) => f in credentials))) return null;
  // Name the field that is missing: first one every alternative needs, then one of an alternative already begun.
  const common = sets[0]!.filter((f) => sets.every((set) => set.includes(f)));
  const missingCommon = common.find((f) => !(f in credentials));
  if (missingCommon) return `credentials.${missingCommon} is required for ${type} connections`;
  const begun = sets.find((set) => set.some((f) => !common.includes(f) && f in credentials));
  const missing = begun?.find((f) => !(f in credentials));
  if (begun && missing) return `credentials.${missing} is required for ${type} connections with ${begun.filter((f) => f in credentials && !common.includes(f)).join(', ')}`;
  const ways = sets.map((set) => set.filter((f) => !common.includes(f)).map((f) => `credentials.${f}`).join(' and '));
  return `${ways.join(' or ')} is required for ${type} connections`;
}

function optionsProblem(type: ConnectionType, spec: ConnectionTypeSpec, options: Readonly<Record<string, unknown>>): string | null {
  for (const [key, value] of Object.entries(options)) {
    const option = spec.options[key];
    if (!option) {
      const allowed = Object.keys(spec.options);
      return `options has unknown field '${key}' for ${type} connections` + (allowed.length > 0 ? ` (allowed: ${allowed.join(', ')})` : ' (none are accepted)');
    }
    if (option.type === 'boolean' && typeof value !== 'boolean') return `options.${key} must be boolean`;
    if (option.type === 'string') {
      if (typeof value !== 'string') return `options.${key} must be string`;
      if (option.enum && !option.enum.includes(value)) return `options.${key} must be one of: ${option.enum.join(', ')}`;
      if (option.pattern && !option.pattern.test(value)) return `options.${key} has an invalid format`;
    }
  }
  return null;
}

/** A connection's checked fields, as stored (credentials decrypted). */
export interface ConnectionFields {
  type: ConnectionType;
  host: string | null;
  port: number | null;
  path: string;
  credentials: Readonly<Record<string, unknown>> | null;
  options: Readonly<Record<string, unknown>>;
}

/**
 * The first reason the fields do not make a usable connection of their type, naming the field,
 * or null when they do. Shape and JSON types are the request schema's job; this checks what
 * depends on the type.
 */
export function connectionProblem(c: ConnectionFields): string | null {
  const spec = CONNECTION_TYPE_SPECS[c.type];
  if (c.host !== null && !HOST.test(c.host)) return 'host must be a host name or IP address, without scheme, port or path';
  const pathProblem = basePathProblem(c.path);
  if (pathProblem) return pathProblem;
  const credentials = c.credentials ?? {};
  const problem = credentialsProblem(c.type, spec, credentials) ?? optionsProblem(c.type, spec, c.options);
  if (problem) return problem;
  if (c.host === null && spec.hostRequired) {
    if (!spec.hostFromCredential) return `host is required for ${c.type} connections`;
    if (!(spec.hostFromCredential in credentials)) return `host or credentials.${spec.hostFromCredential} is required for ${c.type} connections`;
  }
  return null;
}

/** A stored connection as every read shows it: credentials are never returned. */
export const Connection = Type.Object({
  id: Id,
  name: Type.String(),
  type: ConnectionTypeName,
  host: Type.Union([Type.String(), Type.Null()]),
  port: Type.Integer(),
  path: Type.String(),
  options: Type.Record(Type.String(), Type.Unknown()),
  /** The one agent that serves this connection; null: see `agent_pool`. */
  agent_id: Type.Union([Id, Type.Null()]),
  /** The pool (an agent label) whose agents serve this connection; null with `agent_id` null: any agent of the account. */
  agent_pool: Type.Union([Type.String(), Type.Null()]),
  /** True when credentials are stored (nfs may have none). */
  has_credentials: Type.Boolean(),
  created_at: Timestamp,
  updated_at: Timestamp,
});
export type Connection = Static<typeof Connection>;

const Host = Type.String({ minLength: 1, maxLength: 255 });
const Port = Type.Integer({ minimum: 1, maximum: 65535 });
const BasePath = Type.String({ minLength: 1, maxLength: 1024 });
/** Write-only; checked per type by `connectionProblem`. */
const Credentials = Type.Record(Type.String(), Type.Unknown(), { maxProperties: 16 });
const Options = Type.Record(Type.String(), Type.Unknown(), { maxProperties: 32 });
const AgentId = Type.String({ pattern: '^[0-9a-fA-F]{24}$' });

/**
 * POST /connections. Absent `port` means the type's default port; absent `path` means `/`.
 * `agent_id` (one agent) and `agent_pool` (the agents labelled so) are exclusive; neither: any
 * agent of the account with the connector.
 */
export const CreateConnectionRequest = Type.Object(
  {
    name: Name,
    type: ConnectionTypeName,
    host: Type.Optional(Host),
    port: Type.Optional(Port),
    path: Type.Optional(BasePath),
    credentials: Type.Optional(Credentials),
    options: Type.Optional(Options),
    agent_id: Type.Optional(AgentId),
    agent_pool: Type.Optional(AgentLabel),
  },
  { additionalProperties: false },
);
export type CreateConnectionRequest = Static<typeof CreateConnectionRequest>;

/**
 * PUT /connections/:id: only the given fields change. `credentials` and `options`, when given,
 * replace the stored ones entirely; changing `type` requires `credentials` again. `null` clears
 * `host`, `agent_id`, `agent_pool`, or `port` (back to the type's default port).
 */
export const UpdateConnectionRequest = Type.Object(
  {
    name: Type.Optional(Name),
    type: Type.Optional(ConnectionTypeName),
    host: Type.Optional(Type.Union([Host, Type.Null()])),
    port: Type.Optional(Type.Union([Port, Type.Null()])),
    path: Type.Optional(BasePath),
    credentials: Type.Optional(Credentials),
    options: Type.Optional(Options),
    agent_id: Type.Optional(Type.Union([AgentId, Type.Null()])),
    agent_pool: Type.Optional(Type.Union([AgentLabel, Type.Null()])),
  },
  { additionalProperties: false, minProperties: 1 },
);
export type UpdateConnectionRequest = Static<typeof UpdateConnectionRequest>;

export const ListConnectionsQuery = Type.Composite([PageQuery, Type.Object({ type: Type.Optional(ConnectionTypeName) })], { additionalProperties: false });
export type ListConnectionsQuery = Static<typeof ListConnectionsQuery>;

/**
 * Everything a connector needs to reach the endpoint, credentials decrypted: only ever sent to
 * the agent that serves the connection. `host` is resolved where the type has a fixed or derived
 * one; `options` carry their defaults.
 */
export const ConnectionSettings = Type.Object({
  id: Id,
  name: Type.String(),
  type: ConnectionTypeName,
  host: Type.Union([Type.String(), Type.Null()]),
  port: Type.Integer(),
  path: Type.String(),
  options: Type.Record(Type.String(), Type.Unknown()),
  agent_id: Type.Union([Id, Type.Null()]),
  credentials: Type.Record(Type.String(), Type.Union([Type.String(), Type.Integer()])),
});
export type ConnectionSettings = Static<typeof ConnectionSettings>;

/** `options` with each absent option's default filled in. */
export function optionsWithDefaults(type: ConnectionType, options: Readonly<Record<string, unknown>>): Record<string, unknown> {
  const filled: Record<string, unknown> = {};
  for (const [key, spec] of Object.entries(CONNECTION_TYPE_SPECS[type].options)) {
    if (spec.default !== undefined) filled[key] = spec.default;
  }
  return { ...filled, ...options };
}

/** What stored credentials stay bound to: where they are sent and how (docs/security.md "Credential binding"). */
export interface CredentialPlace {
  type: ConnectionType;
  host: string | null;
  port: number | null;
  options: Readonly<Record<string, unknown>>;
  agent_id: string | null;
  /** Pool of agents, where a connection names one instead of an agent. */
  agent_pool?: string | null;
}

/**
 * The first field (`host`, `port`, `options.<name>`, `agent_id`, `agent_pool`) whose change
 * between `before` and `after` moves stored credentials elsewhere or weakens how they travel,
 * or null. Absent values count as their defaults, so restating the current value is no change.
 */
export function credentialBindingChange(before: CredentialPlace, after: CredentialPlace): string | null {
  const spec = CONNECTION_TYPE_SPECS[after.type];
  if ((before.host ?? '').toLowerCase() !== (after.host ?? '').toLowerCase()) return 'host';
  if ((before.port ?? CONNECTION_TYPE_SPECS[before.type].defaultPort) !== (after.port ?? spec.defaultPort)) return 'port';
  const was = optionsWithDefaults(before.type, before.options);
  const now = optionsWithDefaults(after.type, after.options);
  for (const [key, option] of Object.entries(spec.options)) {
    if (option.bindsCredentials && was[key] !== now[key]) return `options.${key}`;
  }
  if ((before.agent_id ?? null) !== (after.agent_id ?? null)) return 'agent_id';
  if ((before.agent_pool ?? null) !== (after.agent_pool ?? null)) return 'agent_pool';
  return null;
}
