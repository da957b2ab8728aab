import { Agent as HttpAgent } from 'node:http';
import { Agent as HttpsAgent } from 'node:https';
import { isIP } from 'node:net';
import type { ConnectionSettings } from '@xfer/shared';
import type { NetworkGuard } from '../network-guard.js';
import { ConnectorError } from '../types.js';

/** The Azure Storage services a connection type reaches: its host label and connection-string endpoint key. */
const SERVICES = {
  blob: { label: 'blob', endpointKey: 'BlobEndpoint', noun: 'blob' },
  file: { label: 'file', endpointKey: 'FileEndpoint', noun: 'fileshare' },
} as const;
export type AzureService = keyof typeof SERVICES;

/**
 * How a connection reaches its storage account: a connection string, handed to the SDK's
 * `fromConnectionString` as it is, or an account name and key with the URL they imply.
 */
export type AzureAccount =
  | { kind: 'connection-string'; connectionString: string }
  | { kind: 'shared-key'; url: string; accountName: string; accountKey: string };

/** The retry and timeout settings of the Azure SDK pipelines (the engine retries TRANSIENT failures on top). */
export interface AzureRetryTuning {
  /** Attempts per request inside the SDK. */
  maxTries: number;
  /** A request that has not finished in this long fails (TRANSIENT). */
  tryTimeoutMs: number;
}

/** Pipeline options both SDKs (blob, file share) take: bounded retries, our user agent. */
export function azurePipelineOptions(tuning: AzureRetryTuning) {
  return {
    retryOptions: { maxTries: tuning.maxTries, tryTimeoutInMs: tuning.tryTimeoutMs, retryDelayInMs: 200, maxRetryDelayInMs: 2000 },
    userAgentOptions: { userAgentPrefix: 'xfer-agent' },
  };
}

/**
 * A service client of either SDK (blob, file share) whose every connection goes through `guard`
 * (the agent's allow/deny lists). The SDKs take one node:http(s) agent (pipeline option `agent`,
 * not in their option types), whose scheme must match the account URL's, and a connection string
 * gives the URL only once parsed: `build` makes the client once to learn it, then again with it.
 */
export function guardedClient<P extends object, C extends { url: string }>(build: (pipeline: P) => C, pipeline: P, guard: NetworkGuard): C {
  const probe = build(pipeline);
  const options = { keepAlive: true };
  const agent = guard.protect(probe.url.startsWith('https:') ? new HttpsAgent(options) : new HttpAgent(options));
  return build({ ...pipeline, agent });
}

/**
 * Reads a connection's credentials. Either `connection_string` (as the Azure portal shows it, or
 * an emulator's `BlobEndpoint=...` / `FileEndpoint=...`; `host`/`port` are then ignored) or
 * `account_name` + `account_key`, whose endpoint is `https://<account>.<service>.<endpoint_suffix>`,
 * or `https://<host>[:port]` when `host` is given (with `/<account>` appended when the host is an
 * IP address or a single-label name, the emulators' path-style addressing).
 */
export function azureAccount(settings: ConnectionSettings, service: AzureService): AzureAccount {
  const credentials = settings.credentials;
  const connectionString = stringField(credentials, 'connection_string');
  if (connectionString) return { kind: 'connection-string', connectionString };
  const accountName = stringField(credentials, 'account_name');
  const accountKey = stringField(credentials, 'account_key');
  if (!accountName || !accountKey) throw new ConnectorError('AUTH', `${SERVICES[service].noun} connections need credentials.connection_string, or credentials.account_name and credentials.account_key`);
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(accountKey)) throw new ConnectorError('AUTH', 'credentials.account_key is not base64 (copy the key as the Azure portal shows it)');
  const suffix = typeof settings.options.endpoint_suffix === 'string' && settings.options.endpoint_suffix !== '' ? settings.options.endpoint_suffix : 'core.windows.net';
  return { kind: 'shared-key', url: accountUrl(accountName, settings.host, settings.port, `${SERVICES[service].label}.${suffix}`), accountName, accountKey };
}

/**
 * The error for a connection string the SDK could not parse. The SDK's own message may quote the
 * string (and so the key): it goes only into `cause`, never into the message.
 */
export function invalidConnectionString(service: AzureService, cause: unknown): ConnectorError {
  const key = SERVICES[service].endpointKey;
  return new ConnectorError('AUTH', `credentials.connection_string is not a valid Azure Storage connection string (AccountName and AccountKey, or ${key} and SharedAccessSignature)`, { cause });
}

/** A client URL fit for messages: without a SAS query string (a secret) and without the trailing slash. */
export function displayUrl(url: string): string {
  return url.replace(/\?.*$/, '').replace(/\/$/, '');
}

function accountUrl(account: string, host: string | null, port: number, serviceHost: string): string {
  if (!host) return `https://${account}.${serviceHost}`;
  const bare = host.replace(/^\[|\]$/g, '');
  const shown = isIP(bare) === 6 ? `[${bare}]` : bare;
  const pathStyle = isIP(bare) !== 0 || !bare.includes('.');
  return `https://${shown}${port && port !== 443 ? `:${port}` : ''}${pathStyle ? `/${account}` : ''}`;
}

/**
 * `/<top>[/<rest>]` → the top-level name (a blob container, a file share) and the rest; refused
 * without a top-level name.
 */
export function topAndRest(path: string, what: 'container' | 'share'): { top: string; rest: string } {
  const segments = path.split('/').filter((s) => s !== '' && s !== '.');
  const top = segments.shift();
  if (!top) throw new ConnectorError('NOT_FOUND', `the connection's path must name a ${what}: /<${what}>[/<${what === 'container' ? 'prefix' : 'directory'}>]`);
  return { top, rest: segments.join('/') };
}

function stringField(record: Readonly<Record<string, unknown>>, key: string): string | undefined {
  const value = record[key];
  return typeof value === 'string' && value !== '' ? value : undefined;
}
