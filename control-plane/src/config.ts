import { isIP, type AddressInfo } from 'node:net';
import { homedir, hostname } from 'node:os';
import { resolve } from 'node:path';

/** Typed configuration, parsed once from the environment by the binary (see docs/configuration.md). */
export interface Config {
  host: string;
  port: number;
  /**
   * The base URL other instances reach this one at (`XFER_INSTANCE_URL`), for the links of relays
   * whose two agents are on different instances; null: derived from the listen address (`advertisedUrl`).
   */
  instanceUrl: string | null;
  /**
   * How often the instance reports itself in the database (`instances`: its active master key id,
   * read by `rotate-keys --drop-retired`); a report older than 3 intervals no longer counts.
   */
  instanceHeartbeatMs: number;
  /** null: start the embedded database (mongod or FerretDB) under `dataDir/db`. */
  mongodbUri: string | null;
  /** Database name used when the URI names none. */
  databaseName: string;
  dataDir: string;
  /** Where the FerretDB binary is built and cached. */
  cacheDir: string;
  /** Active master key (32 bytes) first, then retired keys still accepted for decryption; null: key file in dataDir. */
  masterKeys: Buffer[] | null;
  /** Key signing console sessions (HS256), separate from the master key; null: a key kept in the database (lib/session-key.ts). */
  sessionKey: Buffer | null;
  rateLimitPerMinute: number;
  /** How often an instance reconciles its account rate-limit counts with the other instances. */
  rateLimitSyncMs: number;
  bodyLimitBytes: number;
  /** How long a request body may stall (no byte received) before its connection is closed. */
  bodyIdleTimeoutMs: number;
  sessionTtlSeconds: number;
  logLevel: string;
  /**
   * Which peers' `X-Forwarded-For` is believed (Fastify `trustProxy`): false (none), the number
   * of proxy hops in front, or the proxies' addresses/CIDRs. Never "every peer".
   */
  trustProxy: TrustProxy;
  /** How long a database operation may wait for a reachable server before the API answers 503. */
  dbTimeoutMs: number;
  /** WebSocket ping interval to agents; a socket silent for 3 × this is dropped. */
  agentHeartbeatMs: number;
  /** How long an agent has to send `hello` after connecting. */
  agentHelloTimeoutMs: number;
  /** A running job whose agent is out of contact this long is failed (sent to agents as `lease_ms`). */
  jobLeaseMs: number;
  /**
   * A transfer waiting for an agent (after execute, or taken over) while no agent that could run
   * it is online fails after this long (`XFER_JOB_ORPHAN_TIMEOUT`).
   */
  jobOrphanTimeoutMs: number;
  /** Automatic takeovers of one transfer's runs before it fails instead (`XFER_JOB_MAX_TAKEOVERS`). */
  jobMaxTakeovers: number;
  /** How long a transfer's plan may be executed after it was created (`XFER_PLAN_TTL`; docs/api.md "Sync, move and plans"). */
  planTtlMs: number;
  /** Interval of the coordination loop: dispatch, cancels, agent requests, session refresh, revocations. */
  dispatchPollMs: number;
  /** How long `POST /connections/:id/test` and `POST /agents/:id/test` wait for the agent. */
  agentRequestTimeoutMs: number;
  /** Where uploaded files are kept (docs/configuration.md "Files"). */
  fileStore: FileStoreConfig;
  /** What the retention sweeper deletes, and when. */
  retention: RetentionConfig;
  /** Largest upload accepted; larger answers 413 and nothing is kept. */
  uploadMaxBytes: number;
  /** A data room's upload quota unless the room sets its own (docs/api.md "Data rooms"). */
  dataRoomQuotaBytes: number;
  /** Malware scanner every upload passes before it is stored. */
  scanner: ScannerConfig;
  /** Requests per minute per client address on the unauthenticated share-link download. */
  shareRateLimitPerMinute: number;
  /** Webhook delivery (docs/configuration.md "Webhooks"). */
  webhooks: WebhookConfig;
  /** Email notifications over SMTP (docs/configuration.md "Notifications"). */
  notifications: NotificationConfig;
  /** Sign-in lockout with backoff (docs/configuration.md "Sign-in lockout"). */
  loginLockout: LoginLockoutConfig;
  /** Prometheus `/metrics` (docs/configuration.md "Metrics"). */
  metrics: MetricsConfig;
}

/**
 * Where `GET /metrics` is served: on its own port (`port` set), or on the main port behind the
 * bearer token; neither configured, it is not served (404). The token, when set, is required on
 * the separate port as well.
 */
export interface MetricsConfig {
  port: number | null;
  host: string;
  token: string | null;
}

export interface LoginLockoutConfig {
  /** Failed sign-ins for one email within `windowMs` after which it is locked. */
  emailThreshold: number;
  /** The same per client address (higher: many people may share one NAT address). */
  ipThreshold: number;
  /** The first lock; each further failure doubles it, up to `maxMs`. */
  baseMs: number;
  maxMs: number;
  /** How far back failures count; older ones are forgotten (and swept). */
  windowMs: number;
}

export type FileStoreConfig =
  | { kind: 'local'; dir: string }
  | {
      kind: 's3';
      /** null: AWS's regional endpoint. */
      endpoint: string | null;
      bucket: string;
      /** Key prefix inside the bucket ('' or ending in '/'). */
      prefix: string;
      region: string;
      accessKeyId: string;
      secretAccessKey: string;
      forcePathStyle: boolean;
    };

export type ScannerConfig =
  /** clamd reached over TCP (`host:port`) or a unix socket (an absolute path). */
  | {
      kind: 'clamd';
      address: { host: string; port: number } | { path: string };
      timeoutMs: number;
      /**
       * Files larger than clamd scans whole (2 GiB - 3 B): `windows` scans them as overlapping
       * windows of that size (lib/clamd-windows.ts; the default); `reject` refuses them (413).
       */
      oversize?: 'windows' | 'reject';
    }
  /** No scanning at all: development only, logged as unsafe at every start. */
  | { kind: 'none' };

/** The retention sweeper (plugins/app/retention/, docs/operations.md "Retention"). */
export interface RetentionConfig {
  /** How often a sweep runs (one instance per interval does it). */
  sweepIntervalMs: number;
  /** Audit records are kept at least this long whatever an account sets (`XFER_AUDIT_RETENTION_MIN_DAYS`). */
  auditMinDays: number;
  /** Delivered outbox events are deleted after this many days. */
  outboxDays: number;
  /** Finished webhook deliveries (and their attempts) are deleted after this many days. */
  deliveryDays: number;
  /** Records handled per batch; a sweep does at most `maxBatches` of each kind. */
  batchSize: number;
  maxBatches: number;
}

export interface WebhookConfig {
  /** Per-attempt timeout of a delivery (connect + answer). */
  timeoutMs: number;
  /** How long a delivery is retried (exponential backoff with jitter) before it is marked failed. */
  retryWindowMs: number;
  /** First backoff delay; each retry doubles it up to `backoffMaxMs`, with full jitter. */
  backoffBaseMs: number;
  /** The longest wait between two attempts (1 h): how late a delivery can come after its receiver is back. */
  backoffMaxMs: number;
  /** How often each instance looks for due deliveries. */
  pollMs: number;
  /**
   * UNSAFE, tests only: addresses or CIDR ranges (e.g. `127.0.0.1/32`) a webhook may target
   * although they are private. Empty by default; logged as unsafe at start when set.
   */
  unsafeAllowedAddresses: string[];
}

export interface NotificationConfig {
  /** Per-attempt timeout of one email (connect, TLS, SMTP dialogue). */
  timeoutMs: number;
  /** How long a notification is retried (exponential backoff with jitter) before it is marked failed. */
  retryWindowMs: number;
  /** First backoff delay; each retry doubles it up to `backoffMaxMs`, with full jitter. */
  backoffBaseMs: number;
  /** The longest wait between two attempts (1 h): how late an email can go out after its SMTP server is back. */
  backoffMaxMs: number;
  /** How often each instance looks for due notifications. */
  pollMs: number;
  /**
   * UNSAFE, tests only: addresses or CIDR ranges an SMTP server may be at although they are
   * private (XFER_UNSAFE_SMTP_ALLOW). Empty by default; logged as unsafe at start when set.
   */
  unsafeAllowedAddresses: string[];
}

export type TrustProxy = false | number | string[];

export class ConfigError extends Error {}

type Env = Record<string, string | undefined>;

function int(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new ConfigError(`${name} must be an integer between ${min} and ${max} (got "${raw}")`);
  }
  return value;
}

const DURATION_UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3600_000 };

/** A duration: milliseconds as a bare integer, or an integer with a unit (`500ms`, `90s`, `10m`, `1h`). */
function duration(env: Env, name: string, fallbackMs: number, minMs: number, maxMs: number): number {
  const raw = env[name]?.trim();
  if (raw === undefined || raw === '') return fallbackMs;
  const m = /^(\d+)(ms|s|m|h)?$/.exec(raw);
  const value = m ? Number(m[1]) * DURATION_UNITS[m[2] ?? 'ms']! : NaN;
  if (!Number.isSafeInteger(value) || value < minMs || value > maxMs) {
    throw new ConfigError(`${name} must be a duration between ${minMs} ms and ${maxMs / 3600_000} h: milliseconds, or a number with ms, s, m or h (got "${raw}")`);
  }
  return value;
}

/** Accepts 32 bytes as 64 hex characters or base64/base64url. */
export function parseMasterKey(raw: string, name: string): Buffer {
  const text = raw.trim();
  const key = /^[0-9a-fA-F]{64}$/.test(text) ? Buffer.from(text, 'hex') : Buffer.from(text, 'base64');
  if (key.length !== 32) throw new ConfigError(`${name} must be 32 bytes, as 64 hex characters or base64`);
  return key;
}

const GIB = 1024 ** 3;

function parseFileStore(env: Env, dataDir: string): FileStoreConfig {
  const kind = env.XFER_FILE_STORE || 'local';
  if (kind === 'local') return { kind, dir: resolve(env.XFER_FILE_STORE_DIR || resolve(dataDir, 'files')) };
  if (kind !== 's3') throw new ConfigError('XFER_FILE_STORE must be local or s3');
  const need = (name: string) => {
    const value = env[name];
    if (!value) throw new ConfigError(`${name} is required when XFER_FILE_STORE=s3`);
    return value;
  };
  const prefix = (env.XFER_FILE_STORE_S3_PREFIX || '').replace(/^\/+/, '');
  return {
    kind,
    endpoint: env.XFER_FILE_STORE_S3_ENDPOINT || null,
    bucket: need('XFER_FILE_STORE_S3_BUCKET'),
    prefix: prefix === '' || prefix.endsWith('/') ? prefix : `${prefix}/`,
    region: env.XFER_FILE_STORE_S3_REGION || 'us-east-1',
    accessKeyId: need('XFER_FILE_STORE_S3_ACCESS_KEY_ID'),
    secretAccessKey: need('XFER_FILE_STORE_S3_SECRET_ACCESS_KEY'),
    forcePathStyle: env.XFER_FILE_STORE_S3_FORCE_PATH_STYLE !== 'false',
  };
}

/** The Debian clamav-daemon socket, used when XFER_CLAMD is not set. */
export const DEFAULT_CLAMD = '/var/run/clamav/clamd.ctl';

function parseScanner(env: Env): ScannerConfig {
  const kind = env.XFER_SCANNER || 'clamd';
  if (kind === 'none') {
    if (env.XFER_CLAMD) throw new ConfigError('XFER_CLAMD and XFER_SCANNER=none contradict each other');
    return { kind };
  }
  if (kind !== 'clamd') throw new ConfigError('XFER_SCANNER must be clamd or none');
  const raw = env.XFER_CLAMD || DEFAULT_CLAMD;
  const timeoutMs = int(env, 'XFER_CLAMD_TIMEOUT_MS', 120_000, 100, 3600_000);
  const oversize = env.XFER_SCAN_OVERSIZE || 'windows';
  if (oversize !== 'windows' && oversize !== 'reject') throw new ConfigError('XFER_SCAN_OVERSIZE must be windows or reject');
  if (raw.startsWith('/')) return { kind, address: { path: raw }, timeoutMs, oversize };
  const match = /^(\[[0-9a-fA-F:.]+\]|[^:\s]+):(\d{1,5})$/.exec(raw);
  const port = match ? Number(match[2]) : NaN;
  if (!match || port < 1 || port > 65535) throw new ConfigError(`XFER_CLAMD must be host:port or an absolute socket path (got "${raw}")`);
  return { kind, address: { host: match[1]!.replace(/^\[|\]$/g, ''), port }, timeoutMs, oversize };
}

/** proxy-addr's names for well-known ranges, which Fastify accepts in the list as well. */
const PROXY_RANGE_NAMES = new Set(['loopback', 'linklocal', 'uniquelocal']);

/**
 * `XFER_TRUST_PROXY`: a hop count or a list of proxy addresses/CIDRs. `true`/`all` is refused:
 * trusting every peer lets any client choose the address the per-IP limits, login lockout and
 * audit records see, simply by sending `X-Forwarded-For`.
 */
export function parseTrustProxy(raw: string | undefined): TrustProxy {
  const text = (raw ?? '').trim();
  if (text === '' || text === 'false') return false;
  if (['true', 'all', '*'].includes(text.toLowerCase())) {
    throw new ConfigError(
      `XFER_TRUST_PROXY=${text} would believe X-Forwarded-For from any client, who could then pick the address ` +
        'rate limits, login lockout and the audit trail see; give the number of proxies in front (e.g. 1) or their addresses/CIDRs',
    );
  }
  if (/^\d+$/.test(text)) {
    const hops = Number(text);
    if (hops === 0) return false;
    if (hops > 16) throw new ConfigError(`XFER_TRUST_PROXY must be a hop count between 0 and 16, or a list of addresses/CIDRs (got "${text}")`);
    return hops;
  }
  return text.split(',').map((item) => item.trim()).filter((item) => item !== '').map((item) => {
    if (PROXY_RANGE_NAMES.has(item)) return item;
    const [address, prefix, extra] = item.split('/');
    const family = isIP(address ?? '');
    const bits = family === 4 ? 32 : 128;
    const prefixOk = prefix === undefined || (/^\d{1,3}$/.test(prefix) && Number(prefix) <= bits);
    if (family === 0 || !prefixOk || extra !== undefined) {
      throw new ConfigError(`XFER_TRUST_PROXY has "${item}", which is not an IP address, a CIDR range or one of loopback, linklocal, uniquelocal`);
    }
    return item;
  });
}

/**
 * The setting as Fastify takes it. Fastify 5 no longer honours a bare number (it fails closed), so
 * a hop count becomes proxy-addr's `(address, hop) => hop < n`, as Express's numeric setting does:
 * the socket peer and the next n-1 addresses to its left are proxies, the one before is the client.
 */
export function fastifyTrustProxy(trust: TrustProxy): false | string[] | ((address: string, hop: number) => boolean) {
  if (typeof trust !== 'number') return trust;
  return trust === 0 ? false : (_address, hop) => hop < trust;
}

function parseNotifications(env: Env): NotificationConfig {
  return {
    timeoutMs: int(env, 'XFER_SMTP_TIMEOUT_MS', 30_000, 100, 300_000),
    retryWindowMs: int(env, 'XFER_NOTIFY_RETRY_WINDOW_MS', 24 * 3600_000, 1000, 30 * 24 * 3600_000),
    ...backoff(env, 'XFER_NOTIFY'),
    pollMs: int(env, 'XFER_NOTIFY_POLL_MS', 1000, 10, 60_000),
    unsafeAllowedAddresses: (env.XFER_UNSAFE_SMTP_ALLOW || '').split(',').map((a) => a.trim()).filter((a) => a !== ''),
  };
}

function parseWebhooks(env: Env): WebhookConfig {
  return {
    timeoutMs: int(env, 'XFER_WEBHOOK_TIMEOUT_MS', 10_000, 100, 120_000),
    retryWindowMs: int(env, 'XFER_WEBHOOK_RETRY_WINDOW_MS', 24 * 3600_000, 1000, 30 * 24 * 3600_000),
    ...backoff(env, 'XFER_WEBHOOK'),
    pollMs: int(env, 'XFER_WEBHOOK_POLL_MS', 1000, 10, 60_000),
    unsafeAllowedAddresses: (env.XFER_UNSAFE_WEBHOOK_ALLOW || '').split(',').map((a) => a.trim()).filter((a) => a !== ''),
  };
}

/** `<prefix>_BACKOFF_BASE_MS` and `<prefix>_BACKOFF_MAX_MS` of a retried delivery; the longest wait is at least the first. */
function backoff(env: Env, prefix: string): { backoffBaseMs: number; backoffMaxMs: number } {
  const backoffBaseMs = int(env, `${prefix}_BACKOFF_BASE_MS`, 30_000, 10, 3600_000);
  const backoffMaxMs = int(env, `${prefix}_BACKOFF_MAX_MS`, 3600_000, 10, 24 * 3600_000);
  if (backoffMaxMs < backoffBaseMs) throw new ConfigError(`${prefix}_BACKOFF_MAX_MS must be at least ${prefix}_BACKOFF_BASE_MS (${backoffBaseMs})`);
  return { backoffBaseMs, backoffMaxMs };
}

/** Shorter tokens are refused: `/metrics` on the main port is reachable by whoever reaches the API. */
const METRICS_TOKEN_MIN_LENGTH = 16;

function parseMetrics(env: Env): MetricsConfig {
  const token = env.XFER_METRICS_TOKEN || null;
  if (token !== null && (token.length < METRICS_TOKEN_MIN_LENGTH || /\s/.test(token))) {
    throw new ConfigError(`XFER_METRICS_TOKEN must be at least ${METRICS_TOKEN_MIN_LENGTH} characters without spaces`);
  }
  const port = env.XFER_METRICS_PORT ? int(env, 'XFER_METRICS_PORT', 0, 0, 65535) : null;
  if (port === null && env.XFER_METRICS_HOST) throw new ConfigError('XFER_METRICS_HOST needs XFER_METRICS_PORT');
  return { port, host: env.XFER_METRICS_HOST || '127.0.0.1', token };
}

/** `XFER_INSTANCE_URL`: an http(s) base URL without credentials, query or fragment; no trailing slash. */
export function parseInstanceUrl(raw: string | undefined): string | null {
  const text = (raw ?? '').trim();
  if (text === '') return null;
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new ConfigError(`XFER_INSTANCE_URL must be an http:// or https:// URL (got "${text}")`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new ConfigError(`XFER_INSTANCE_URL must be an http:// or https:// URL (got "${text}")`);
  if (url.username || url.password || url.search || url.hash) throw new ConfigError('XFER_INSTANCE_URL must not carry credentials, a query or a fragment');
  return url.href.replace(/\/+$/, '');
}

/**
 * The URL other instances reach this one at: `XFER_INSTANCE_URL`, else `http://<listen host>:<port>`
 * of the address the app listens on (the machine's host name when it listens on every interface).
 * Null while it does not listen.
 */
export function advertisedUrl(config: Pick<Config, 'instanceUrl'>, address: AddressInfo | string | null): string | null {
  if (config.instanceUrl) return config.instanceUrl;
  if (!address || typeof address === 'string') return null;
  const wildcard = address.address === '0.0.0.0' || address.address === '::' || address.address === '';
  const host = wildcard ? hostname() : address.address;
  return `http://${isIP(host) === 6 ? `[${host}]` : host}:${address.port}`;
}

export function parseConfig(env: Env): Config {
  const dataDir = resolve(env.XFER_DATA_DIR || '.xfer');
  const active = env.XFER_MASTER_KEY ? [parseMasterKey(env.XFER_MASTER_KEY, 'XFER_MASTER_KEY')] : null;
  const retired = (env.XFER_RETIRED_MASTER_KEYS || '')
    .split(',')
    .filter((k) => k.trim() !== '')
    .map((k) => parseMasterKey(k, 'XFER_RETIRED_MASTER_KEYS'));
  if (!active && retired.length > 0) throw new ConfigError('XFER_RETIRED_MASTER_KEYS needs XFER_MASTER_KEY');
  const logLevel = env.XFER_LOG_LEVEL || 'info';
  if (!['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].includes(logLevel)) {
    throw new ConfigError(`XFER_LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent`);
  }
  const agentHeartbeatMs = int(env, 'XFER_AGENT_HEARTBEAT_MS', 10_000, 100, 300_000);
  const jobLeaseMs = int(env, 'XFER_JOB_LEASE_MS', 30_000, 200, 24 * 3600_000);
  // A live agent is heard from every heartbeat; a shorter lease would fail the jobs of live agents.
  if (jobLeaseMs < 2 * agentHeartbeatMs) throw new ConfigError('XFER_JOB_LEASE_MS must be at least twice XFER_AGENT_HEARTBEAT_MS');
  const lockBase = int(env, 'XFER_LOGIN_LOCK_BASE_MS', 30_000, 100, 24 * 3600_000);
  const lockMax = int(env, 'XFER_LOGIN_LOCK_MAX_MS', 3600_000, 100, 7 * 24 * 3600_000);
  if (lockMax < lockBase) throw new ConfigError('XFER_LOGIN_LOCK_MAX_MS must be at least XFER_LOGIN_LOCK_BASE_MS');
  return {
    host: env.XFER_HOST || '127.0.0.1',
    port: int(env, 'XFER_PORT', 8080, 0, 65535),
    instanceUrl: parseInstanceUrl(env.XFER_INSTANCE_URL),
    instanceHeartbeatMs: int(env, 'XFER_INSTANCE_HEARTBEAT_MS', 10_000, 100, 300_000),
    mongodbUri: env.MONGODB_URI || null,
    databaseName: env.XFER_DB_NAME || 'xfer',
    dataDir,
    cacheDir: resolve(env.XFER_CACHE_DIR || resolve(env.HOME || homedir(), '.cache/xfer')),
    masterKeys: active ? [...active, ...retired] : null,
    sessionKey: env.XFER_SESSION_KEY ? parseMasterKey(env.XFER_SESSION_KEY, 'XFER_SESSION_KEY') : null,
    rateLimitPerMinute: int(env, 'XFER_RATE_LIMIT_PER_MINUTE', 600, 1, 1_000_000),
    rateLimitSyncMs: int(env, 'XFER_RATE_LIMIT_SYNC_MS', 1000, 100, 60_000),
    bodyLimitBytes: int(env, 'XFER_BODY_LIMIT_BYTES', 1024 * 1024, 1024, 64 * 1024 * 1024),
    bodyIdleTimeoutMs: int(env, 'XFER_BODY_IDLE_TIMEOUT_MS', 60_000, 100, 3600_000),
    sessionTtlSeconds: int(env, 'XFER_SESSION_TTL_SECONDS', 12 * 3600, 60, 30 * 24 * 3600),
    logLevel,
    trustProxy: parseTrustProxy(env.XFER_TRUST_PROXY),
    dbTimeoutMs: int(env, 'XFER_DB_TIMEOUT_MS', 3000, 100, 60_000),
    agentHeartbeatMs,
    agentHelloTimeoutMs: int(env, 'XFER_AGENT_HELLO_TIMEOUT_MS', 5_000, 100, 120_000),
    jobLeaseMs,
    jobOrphanTimeoutMs: duration(env, 'XFER_JOB_ORPHAN_TIMEOUT', 600_000, 100, 7 * 24 * 3600_000),
    jobMaxTakeovers: int(env, 'XFER_JOB_MAX_TAKEOVERS', 5, 0, 1000),
    planTtlMs: duration(env, 'XFER_PLAN_TTL', 3_600_000, 1_000, 7 * 24 * 3600_000),
    dispatchPollMs: int(env, 'XFER_DISPATCH_POLL_MS', 500, 10, 10_000),
    agentRequestTimeoutMs: int(env, 'XFER_AGENT_REQUEST_TIMEOUT_MS', 30_000, 100, 600_000),
    fileStore: parseFileStore(env, dataDir),
    retention: {
      sweepIntervalMs: duration(env, 'XFER_RETENTION_SWEEP_INTERVAL', 3600_000, 1000, 24 * 3600_000),
      auditMinDays: int(env, 'XFER_AUDIT_RETENTION_MIN_DAYS', 365, 30, 3650),
      outboxDays: int(env, 'XFER_OUTBOX_RETENTION_DAYS', 7, 1, 3650),
      deliveryDays: int(env, 'XFER_DELIVERY_RETENTION_DAYS', 30, 1, 3650),
      batchSize: int(env, 'XFER_RETENTION_BATCH', 500, 1, 10_000),
      maxBatches: int(env, 'XFER_RETENTION_MAX_BATCHES', 20, 1, 10_000),
    },
    uploadMaxBytes: int(env, 'XFER_UPLOAD_MAX_BYTES', 10 * GIB, 1, Number.MAX_SAFE_INTEGER),
    dataRoomQuotaBytes: int(env, 'XFER_DATA_ROOM_QUOTA_BYTES', 10 * GIB, 1, Number.MAX_SAFE_INTEGER),
    scanner: parseScanner(env),
    shareRateLimitPerMinute: int(env, 'XFER_SHARE_RATE_LIMIT_PER_MINUTE', 120, 1, 1_000_000),
    webhooks: parseWebhooks(env),
    notifications: parseNotifications(env),
    loginLockout: {
      emailThreshold: int(env, 'XFER_LOGIN_LOCK_EMAIL_AFTER', 5, 1, 1000),
      ipThreshold: int(env, 'XFER_LOGIN_LOCK_IP_AFTER', 20, 1, 100_000),
      baseMs: lockBase,
      maxMs: lockMax,
      windowMs: int(env, 'XFER_LOGIN_LOCK_WINDOW_MS', 24 * 3600_000, 1000, 30 * 24 * 3600_000),
    },
    metrics: parseMetrics(env),
  };
}
