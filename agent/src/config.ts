import { isAbsolute } from 'node:path';
import { parseArgs } from 'node:util';
import { AgentLabel } from '@xfer/shared';
import { parseHostList } from './connectors/network-guard.js';
import { BandwidthTimetable } from './copy/bandwidth.js';
import { DEFAULT_MULTI_STREAM, type MultiStreamTuning } from './copy/multi-stream.js';
import { isTimeZone, localTimeZone } from './lib/zoned-time.js';

/** Typed configuration of `xfer-agent start`, parsed once by the binary (docs/agent.md). */
export interface AgentConfig {
  /**
   * The control plane's base URLs as given (several instances, or one behind a load balancer),
   * without duplicates, in the order given.
   */
  urls: string[];
  /** Derived, one per URL: `ws(s)://…/api/v1/agents/connect`; the session dials them in turn. */
  connectUrls: string[];
  token: string;
  maxJobs: number;
  /** Pools the operator puts the agent in (`--label`, repeatable), sent in `hello.labels`. */
  labels: string[];
  logLevel: LogLevel;
  drainTimeoutMs: number;
  /**
   * The agent's state directory: job reports waiting for the control plane past
   * `outboxMemoryBytes` are spilled under `outbox/<pid>/` (null: no home directory, kept in memory).
   */
  stateDir: string | null;
  outboxMemoryBytes: number;
  /** Local directories connections may use (nfs `mount_path`, …); none by default. */
  allowRoots: string[];
  /** Hosts the agent may dial (IPs, CIDRs, names, `*.domain`); empty: any host not denied. */
  allowHosts: string[];
  /** Hosts the agent never dials; beats allowHosts. Cloud metadata and link-local are denied anyway. */
  denyHosts: string[];
  /** Port of the Prometheus `/metrics` listener (`--metrics-port`); null: none. */
  metricsPort: number | null;
  /** Its address; loopback unless set (it has no authentication). */
  metricsHost: string;
  /**
   * The agent-wide bandwidth limit or timetable (`--bwlimit`, rclone's syntax) across all its runs,
   * in `--bwlimit-tz` (default: the process's zone); null: none (docs/agent.md "Bandwidth limits and run windows").
   */
  bwlimit: BandwidthTimetable | null;
  /** Several streams per large file (copy/multi-stream.ts; docs/agent.md "Several streams per file"). */
  multiStream: MultiStreamTuning;
  /** The config file read, if any. */
  configFile: string | null;
}

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** A bad flag, variable or config file: the binary exits with code 2. */
export class UsageError extends Error {}

type Env = Record<string, string | undefined>;

/** One setting: its flag, environment variable and config-file key. */
interface Setting {
  flag: string;
  env: string;
  key: string;
}

const SETTINGS = {
  url: { flag: 'url', env: 'XFER_AGENT_URL', key: 'url' },
  token: { flag: 'token', env: 'XFER_AGENT_TOKEN', key: 'token' },
  maxJobs: { flag: 'max-jobs', env: 'XFER_AGENT_MAX_JOBS', key: 'max_jobs' },
  labels: { flag: 'label', env: 'XFER_AGENT_LABELS', key: 'labels' },
  logLevel: { flag: 'log-level', env: 'XFER_LOG_LEVEL', key: 'log_level' },
  drainTimeoutMs: { flag: 'drain-timeout-ms', env: 'XFER_AGENT_DRAIN_TIMEOUT_MS', key: 'drain_timeout_ms' },
  stateDir: { flag: 'state-dir', env: 'XFER_AGENT_STATE_DIR', key: 'state_dir' },
  outboxMemoryBytes: { flag: 'outbox-memory-bytes', env: 'XFER_AGENT_OUTBOX_MEMORY_BYTES', key: 'outbox_memory_bytes' },
  allowRoots: { flag: 'allow-roots', env: 'XFER_AGENT_ALLOW_ROOTS', key: 'allow_roots' },
  allowHosts: { flag: 'allow-hosts', env: 'XFER_AGENT_ALLOW_HOSTS', key: 'allow_hosts' },
  denyHosts: { flag: 'deny-hosts', env: 'XFER_AGENT_DENY_HOSTS', key: 'deny_hosts' },
  metricsPort: { flag: 'metrics-port', env: 'XFER_AGENT_METRICS_PORT', key: 'metrics_port' },
  metricsHost: { flag: 'metrics-host', env: 'XFER_AGENT_METRICS_HOST', key: 'metrics_host' },
  bwlimit: { flag: 'bwlimit', env: 'XFER_AGENT_BWLIMIT', key: 'bwlimit' },
  bwlimitTz: { flag: 'bwlimit-tz', env: 'XFER_AGENT_BWLIMIT_TZ', key: 'bwlimit_tz' },
  multiStreams: { flag: 'multi-streams', env: 'XFER_AGENT_MULTI_STREAMS', key: 'multi_streams' },
  multiStreamCutoff: { flag: 'multi-stream-cutoff', env: 'XFER_AGENT_MULTI_STREAM_CUTOFF', key: 'multi_stream_cutoff' },
  multiStreamMemory: { flag: 'multi-stream-memory', env: 'XFER_AGENT_MULTI_STREAM_MEMORY', key: 'multi_stream_memory' },
} satisfies Record<string, Setting>;

const FILE_KEYS = new Set(Object.values(SETTINGS).map((s) => s.key));

export const DEFAULT_MAX_JOBS = 4;
/** Most labels an agent announces (the protocol's bound on `hello.labels`). */
export const MAX_LABELS = 32;
const LABEL = new RegExp(AgentLabel.pattern!);
export const DEFAULT_DRAIN_TIMEOUT_MS = 30_000;
export const DEFAULT_OUTBOX_MEMORY_BYTES = 8 * 1024 * 1024;

/** `$XDG_STATE_HOME/xfer-agent`, else `$HOME/.local/state/xfer-agent` (the XDG default), else none. */
export function defaultStateDir(env: Env): string | null {
  if (env.XDG_STATE_HOME?.startsWith('/')) return `${env.XDG_STATE_HOME.replace(/\/+$/, '')}/xfer-agent`;
  if (env.HOME?.startsWith('/')) return `${env.HOME.replace(/\/+$/, '')}/.local/state/xfer-agent`;
  return null;
}

export interface ParseInput {
  /** Arguments after `start`. */
  args: string[];
  env: Env;
  /** Reads the config file (injected: tests, and the binary's fs). */
  readFile: (path: string) => string;
}

/**
 * Flags > environment > config file (`--config FILE` or `XFER_AGENT_CONFIG`, JSON with the keys
 * `url`, `token`, `max_jobs`, `labels`, `log_level`, `drain_timeout_ms`, `allow_roots`, `allow_hosts`,
 * `deny_hosts`, `metrics_port`, `metrics_host`, `bwlimit`, `bwlimit_tz`, `multi_streams`, `multi_stream_cutoff`, `multi_stream_memory`). Lists are comma-separated in flags and variables, JSON arrays (or a
 * comma-separated string) in the file; the first source that sets a list wins whole (lists are not
 * merged across sources). `url` is a list (several control-plane instances); `--url` and `--label`
 * may also be repeated. Every problem is a UsageError naming the flag, variable or key.
 */
export function parseAgentConfig(input: ParseInput): AgentConfig {
  let parsed;
  try {
    parsed = parseArgs({
      args: input.args,
      strict: true,
      allowPositionals: false,
      options: {
        url: { type: 'string', multiple: true }, token: { type: 'string' }, config: { type: 'string' },
        'max-jobs': { type: 'string' }, label: { type: 'string', multiple: true }, 'log-level': { type: 'string' }, 'drain-timeout-ms': { type: 'string' },
        'state-dir': { type: 'string' }, 'outbox-memory-bytes': { type: 'string' },
        'allow-roots': { type: 'string' }, 'allow-hosts': { type: 'string' }, 'deny-hosts': { type: 'string' },
        'metrics-port': { type: 'string' }, 'metrics-host': { type: 'string' },
        bwlimit: { type: 'string' }, 'bwlimit-tz': { type: 'string' },
        'multi-streams': { type: 'string' }, 'multi-stream-cutoff': { type: 'string' }, 'multi-stream-memory': { type: 'string' },
      },
    });
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  const flags = parsed.values as Record<string, string | string[] | undefined>;
  const configFile = (flags.config as string | undefined) ?? (input.env.XFER_AGENT_CONFIG || null);
  const file = configFile ? readConfigFile(configFile, input.readFile) : {};

  /** The raw value and where it came from (for messages). */
  const pick = (s: Setting): { value: unknown; from: string } | null => {
    if (flags[s.flag] !== undefined) return { value: flags[s.flag], from: `--${s.flag}` };
    if (input.env[s.env]) return { value: input.env[s.env], from: s.env };
    if (file[s.key] !== undefined) return { value: file[s.key], from: `${s.key} in ${configFile}` };
    return null;
  };
  const str = (s: Setting): string | null => {
    const got = pick(s);
    if (!got) return null;
    if (typeof got.value !== 'string' || got.value.trim() === '') throw new UsageError(`${got.from} must be a non-empty string`);
    return got.value.trim();
  };
  const int = (s: Setting, fallback: number, min: number, max: number): number => {
    const got = pick(s);
    if (!got) return fallback;
    const value = typeof got.value === 'number' ? got.value : typeof got.value === 'string' && /^\d+$/.test(got.value.trim()) ? Number(got.value) : NaN;
    if (!Number.isInteger(value) || value < min || value > max) throw new UsageError(`${got.from} must be an integer from ${min} to ${max}`);
    return value;
  };

  const list = (s: Setting): string[] => {
    const got = pick(s);
    if (!got) return [];
    // A repeatable flag (`--url A --url B`) is one list: all its values, each comma-separated too.
    if (got.from === `--${s.flag}` && Array.isArray(got.value)) got.value = got.value.join(',');
    const items = typeof got.value === 'string' ? got.value.split(',') : Array.isArray(got.value) && got.value.every((v) => typeof v === 'string') ? (got.value as string[]) : null;
    if (!items) throw new UsageError(`${got.from} must be a list of strings (comma-separated, or a JSON array in the file)`);
    return items.map((v) => v.trim()).filter((v) => v !== '');
  };
  const allowRoots = list(SETTINGS.allowRoots);
  const badRoot = allowRoots.find((root) => !isAbsolute(root));
  if (badRoot !== undefined) throw new UsageError(`allowed roots must be absolute directories, not "${badRoot}" (--allow-roots, XFER_AGENT_ALLOW_ROOTS or "allow_roots")`);
  const hosts = (s: Setting): string[] => {
    const entries = list(s);
    try {
      parseHostList(entries, `--${s.flag} / ${s.env} / "${s.key}"`);
    } catch (err) {
      throw new UsageError((err as Error).message);
    }
    return entries;
  };

  const labels = [...new Set(list(SETTINGS.labels))];
  const badLabel = labels.find((l) => l.length > 64 || !LABEL.test(l));
  if (badLabel !== undefined) {
    throw new UsageError(`labels are letters, digits and . _ : / = - (starting with a letter or digit, 64 at most), not "${badLabel}" (--label, XFER_AGENT_LABELS or "labels")`);
  }
  if (labels.length > MAX_LABELS) throw new UsageError(`at most ${MAX_LABELS} labels (--label, XFER_AGENT_LABELS or "labels")`);

  const urls = list(SETTINGS.url);
  if (urls.length === 0) throw new UsageError('the control plane URL is required: --url, XFER_AGENT_URL or "url" in the config file');
  const connectUrls = urls.map((url) => connectUrl(url));
  const token = str(SETTINGS.token);
  if (!token) throw new UsageError('the agent token is required: --token, XFER_AGENT_TOKEN or "token" in the config file');
  if (!/^agt_[\x21-\x7e]{8,}$/.test(token)) throw new UsageError('the agent token must look like agt_… (as printed by POST /agents)');
  const metricsPort = pick(SETTINGS.metricsPort) ? int(SETTINGS.metricsPort, 0, 0, 65535) : null;
  const metricsHost = str(SETTINGS.metricsHost);
  if (metricsHost !== null && metricsPort === null) throw new UsageError('--metrics-host needs --metrics-port');
  const logLevel = str(SETTINGS.logLevel) ?? 'info';
  if (!(LOG_LEVELS as readonly string[]).includes(logLevel)) throw new UsageError(`log level must be one of ${LOG_LEVELS.join(', ')}`);
  const bwlimit = bandwidthTimetable(pick(SETTINGS.bwlimit), str(SETTINGS.bwlimitTz));
  // The same instance written twice (`http://h/api/v1` and `ws://h/api/v1/agents/connect`) is dialed once.
  const distinct = connectUrls.map((_, i) => i).filter((i) => connectUrls.indexOf(connectUrls[i]!) === i);
  return {
    urls: distinct.map((i) => urls[i]!),
    connectUrls: distinct.map((i) => connectUrls[i]!),
    token,
    maxJobs: int(SETTINGS.maxJobs, DEFAULT_MAX_JOBS, 1, 1000),
    labels,
    logLevel: logLevel as LogLevel,
    drainTimeoutMs: int(SETTINGS.drainTimeoutMs, DEFAULT_DRAIN_TIMEOUT_MS, 0, 24 * 3600 * 1000),
    stateDir: stateDir(str(SETTINGS.stateDir), input.env),
    outboxMemoryBytes: int(SETTINGS.outboxMemoryBytes, DEFAULT_OUTBOX_MEMORY_BYTES, 1024, 1024 * 1024 * 1024),
    allowRoots,
    allowHosts: hosts(SETTINGS.allowHosts),
    denyHosts: hosts(SETTINGS.denyHosts),
    metricsPort,
    metricsHost: metricsHost ?? '127.0.0.1',
    bwlimit,
    multiStream: {
      ...DEFAULT_MULTI_STREAM,
      streams: int(SETTINGS.multiStreams, DEFAULT_MULTI_STREAM.streams, 1, 64),
      cutoffBytes: int(SETTINGS.multiStreamCutoff, DEFAULT_MULTI_STREAM.cutoffBytes, DEFAULT_MULTI_STREAM.segmentBytes, Number.MAX_SAFE_INTEGER),
      budgetBytes: int(SETTINGS.multiStreamMemory, DEFAULT_MULTI_STREAM.budgetBytes, DEFAULT_MULTI_STREAM.segmentBytes, 64 * 1024 ** 3),
    },
    configFile,
  };
}

/** `--bwlimit` checked at start: a bad timetable stops the agent with the flag named, not a job later. */
function bandwidthTimetable(got: { value: unknown; from: string } | null, tz: string | null): BandwidthTimetable | null {
  if (tz !== null && !isTimeZone(tz)) throw new UsageError(`--bwlimit-tz (XFER_AGENT_BWLIMIT_TZ or "bwlimit_tz") is not a known IANA time zone: ${JSON.stringify(tz)}`);
  if (!got) {
    if (tz !== null) throw new UsageError('--bwlimit-tz needs --bwlimit');
    return null;
  }
  if (typeof got.value !== 'string') throw new UsageError(`${got.from} must be a string such as "10M" or "08:00,10M 19:00,off"`);
  try {
    return BandwidthTimetable.parse(got.value, tz ?? localTimeZone());
  } catch (err) {
    throw new UsageError(`${got.from}: ${(err as Error).message} (rclone's --bwlimit syntax: "10M", or "08:00,10M 12:00,off 19:00,512k")`);
  }
}

function stateDir(given: string | null, env: Env): string | null {
  if (given === null) return defaultStateDir(env);
  if (!given.startsWith('/')) throw new UsageError(`the state directory must be an absolute path, not ${JSON.stringify(given)}`);
  return given;
}

function readConfigFile(path: string, readFile: (path: string) => string): Record<string, unknown> {
  let text: string;
  try {
    text = readFile(path);
  } catch (err) {
    throw new UsageError(`cannot read the config file ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new UsageError(`the config file ${path} is not valid JSON`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new UsageError(`the config file ${path} must hold a JSON object`);
  const unknown = Object.keys(value).filter((k) => !FILE_KEYS.has(k));
  if (unknown.length > 0) throw new UsageError(`the config file ${path} has unknown key ${unknown.map((k) => `"${k}"`).join(', ')} (allowed: ${[...FILE_KEYS].join(', ')})`);
  return value as Record<string, unknown>;
}

/**
 * The WebSocket URL of the agent endpoint from the control plane's base URL: `http(s)` becomes
 * `ws(s)`; a path ending in `/api/v1` gets `/agents/connect`; a bare host gets
 * `/api/v1/agents/connect`; a URL already naming `/agents/connect` is kept.
 */
export function connectUrl(base: string): string {
  let url: URL;
  try {
    url = new URL(base);
  } catch {
    throw new UsageError(`the control plane URL is not a URL: ${JSON.stringify(base)}`);
  }
  const schemes: Record<string, string> = { 'http:': 'ws:', 'https:': 'wss:', 'ws:': 'ws:', 'wss:': 'wss:' };
  const scheme = schemes[url.protocol];
  if (!scheme) throw new UsageError(`the control plane URL must be http(s):// or ws(s)://, not ${url.protocol}//`);
  if (url.username || url.password) throw new UsageError('the control plane URL must not carry credentials (use the token)');
  if (url.search || url.hash) throw new UsageError('the control plane URL must not have a query or fragment');
  let path = url.pathname.replace(/\/+$/, '');
  if (!path.endsWith('/agents/connect')) path = path.endsWith('/api/v1') ? `${path}/agents/connect` : `${path}/api/v1/agents/connect`;
  return `${scheme}//${url.host}${path}`;
}

/** True when the URL would send the token unencrypted to another machine. */
export function isPlaintextRemote(connect: string): boolean {
  const url = new URL(connect);
  return url.protocol === 'ws:' && !['127.0.0.1', 'localhost', '[::1]'].includes(url.hostname);
}
