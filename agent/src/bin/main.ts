/**
 * xfer-agent: the daemon near the data. The composition root (loaded by bin/xfer-agent.ts, the
 * launcher): the only place that reads argv, the environment and the config file, builds the
 * logger and the agent, and maps the outcome to an exit code (0 clean stop, 1 failure, 2 usage,
 * 3 token refused or revoked).
 */
import { readFileSync, statSync } from 'node:fs';
import { hostname } from 'node:os';
import { setFlagsFromString } from 'node:v8';
import { Agent } from '../agent.js';
import { AgentAccess } from '../connectors/access.js';
import { SSH_CRYPTO } from '../connectors/sftp/sftp.crypto.js';
import { isPlaintextRemote, parseAgentConfig, UsageError } from '../config.js';
import { AgentMetrics } from '../metrics/agent-metrics.js';
import { listenMetrics } from '@xfer/shared/metrics-listener';
import { createLogger } from '../logger.js';
import { INSTALL_SERVICE_HELP, installService, readStdinLine, runningCommand } from '../service/install-service.js';
import { AGENT_VERSION } from '../version.js';

const HELP = `xfer-agent — runs transfer jobs near the data; dials out to the control plane, never listens

Usage:
  xfer-agent start --url URL --token agt_… [--config FILE] [--max-jobs N] [--log-level L] [--drain-timeout-ms MS]
                   [--allow-roots DIRS] [--allow-hosts HOSTS] [--deny-hosts HOSTS] [--metrics-port N]
  xfer-agent install-service --url URL [--token-stdin] [--name N] [--user U] [--allow-roots DIRS] [--force] [--print]
                   write a systemd unit and its environment file (token at mode 0600); see install-service --help
  xfer-agent --help | --version

Run "xfer-agent start --help" for the settings.`;

const START_HELP = `xfer-agent start — connect to the control plane and run the jobs it assigns

Settings (flag > environment > config file):
  --url URL               XFER_AGENT_URL               url               control plane base, e.g. https://xfer.example.com/api/v1;
                                                                         several instances: repeat --url, or comma-separated
                                                                         (dialed in turn from a random one)
  --token agt_…           XFER_AGENT_TOKEN             token             agent token from POST /agents (prefer env or file: flags show in ps)
  --max-jobs N            XFER_AGENT_MAX_JOBS          max_jobs          jobs run at once (default 4)
  --label L               XFER_AGENT_LABELS            labels            a pool the agent joins (repeat, or comma-separated);
                                                                         added to the labels the account gives it
  --log-level L           XFER_LOG_LEVEL               log_level         fatal|error|warn|info|debug|trace|silent (default info)
  --drain-timeout-ms MS   XFER_AGENT_DRAIN_TIMEOUT_MS  drain_timeout_ms  on SIGTERM, how long running jobs may finish (default 30000)
  --allow-roots DIRS      XFER_AGENT_ALLOW_ROOTS       allow_roots       local directories connections may use (nfs mount_path);
                                                                         comma-separated; none by default
  --allow-hosts HOSTS     XFER_AGENT_ALLOW_HOSTS       allow_hosts       hosts the agent may dial: IPs, CIDRs, names, *.domain;
                                                                         default any host not denied
  --deny-hosts HOSTS      XFER_AGENT_DENY_HOSTS        deny_hosts        hosts it never dials (beats --allow-hosts); cloud
                                                                         metadata and link-local are denied by default
  --metrics-port N        XFER_AGENT_METRICS_PORT      metrics_port      serve Prometheus GET /metrics on this port (default none)
  --metrics-host ADDR     XFER_AGENT_METRICS_HOST      metrics_host      its address (default 127.0.0.1; no authentication)
  --bwlimit SPEC          XFER_AGENT_BWLIMIT           bwlimit           bandwidth of all jobs together, rclone's syntax: 10M,
                                                                         or a timetable "08:00,10M 12:00,off 19:00,512k"
  --bwlimit-tz ZONE       XFER_AGENT_BWLIMIT_TZ        bwlimit_tz        IANA zone of the --bwlimit times (default: the system's)
  --multi-streams N       XFER_AGENT_MULTI_STREAMS     multi_streams     ranged reads at once per large file from a network store
                                                                         (default 4; 1: one stream per file)
  --multi-stream-cutoff B XFER_AGENT_MULTI_STREAM_CUTOFF multi_stream_cutoff  bytes from which a file is read so (default 67108864)
  --multi-stream-memory B XFER_AGENT_MULTI_STREAM_MEMORY multi_stream_memory  bytes those reads may hold per job (default 16777216)
  --config FILE           XFER_AGENT_CONFIG                              JSON file with the keys above (keep it mode 0600;
                                                                         lists as JSON arrays)

Logs are JSON lines on stderr. SIGTERM/SIGINT: take no new jobs, let running ones finish up to the
drain timeout, then stop; a second signal stops at once.
Exit codes: 0 stopped cleanly, 1 failure, 2 usage error, 3 token refused or revoked.`;

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (!command || command === '--help' || command === '-h' || command === 'help') {
    process.stdout.write(HELP + '\n');
    return 0;
  }
  if (command === '--version' || command === '-v') {
    process.stdout.write(AGENT_VERSION + '\n');
    return 0;
  }
  if (command === 'install-service') {
    if (rest.includes('--help') || rest.includes('-h')) return (process.stdout.write(INSTALL_SERVICE_HELP + '\n'), 0);
    return installService({ args: rest, env: process.env, readStdinLine, command: runningCommand(), out: (t) => process.stdout.write(t) });
  }
  if (command !== 'start') throw new UsageError(`unknown command "${command}" (try --help)`);
  if (rest.includes('--help') || rest.includes('-h')) {
    process.stdout.write(START_HELP + '\n');
    return 0;
  }

  const config = parseAgentConfig({ args: rest, env: process.env, readFile: (path) => readFileSync(path, 'utf8') });
  const log = createLogger(config.logLevel);
  // Let the old generation grow to 3× what survived a full collection before the next one (V8
  // picks 1.1–4× itself, read at each collection). The agent's own heap is small (~20 MB) while
  // the bytes it streams sit in buffers V8 counts against that limit (an object store's parts in
  // flight, a relay's frames): with V8's choice a full mark-compact ran every couple of 8 MiB
  // parts, a third of the agent's CPU on a large file (docs/agent.md "Measured").
  setFlagsFromString('--heap-growing-percent=200');
  if (config.configFile && (statSync(config.configFile).mode & 0o077) !== 0) {
    log.warn({ config_file: config.configFile }, 'the config file is readable by other users; it holds the agent token (chmod 600 it)');
  }
  for (const url of config.connectUrls.filter(isPlaintextRemote)) log.warn({ url }, 'unencrypted ws:// to a remote host: the token and credentials travel in clear; use https:// or wss://');

  const metrics = config.metricsPort === null ? undefined : new AgentMetrics();
  const agent = new Agent({
    url: config.connectUrls, token: config.token, version: AGENT_VERSION, hostname: hostname(),
    maxJobs: config.maxJobs, labels: config.labels, drainTimeoutMs: config.drainTimeoutMs, log,
    stateDir: config.stateDir, outboxMemoryBytes: config.outboxMemoryBytes,
    access: new AgentAccess({ allowRoots: config.allowRoots, allowHosts: config.allowHosts, denyHosts: config.denyHosts }),
    metrics, bwlimit: config.bwlimit, tuning: { multiStream: config.multiStream },
  });
  const metricsServer = metrics && config.metricsPort !== null ? await listenMetrics(metrics, { host: config.metricsHost, port: config.metricsPort, onError: (err) => log.warn({ err }, 'metrics scrape failed') }) : null;
  if (metricsServer) log.info({ metrics: `http://${config.metricsHost}:${metricsServer.address.port}/metrics` }, 'metrics listening');
  let signals = 0;
  const onSignal = (signal: NodeJS.Signals) => {
    signals++;
    void agent.shutdown(signal, signals > 1);
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  log.info({
    version: AGENT_VERSION, urls: config.connectUrls, max_jobs: config.maxJobs, labels: config.labels,
    allow_roots: config.allowRoots, allow_hosts: config.allowHosts, deny_hosts: config.denyHosts, ssh_crypto: SSH_CRYPTO,
    ...(config.bwlimit ? { bwlimit: config.bwlimit.spec, bwlimit_tz: config.bwlimit.tz } : {}),
  }, 'xfer-agent starting');

  const exit = await agent.run();
  await metricsServer?.close();
  if (exit.code === 3) log.fatal({ reason: exit.reason }, 'stopping: the control plane refused this agent token; create a new token (POST /agents) and restart');
  else log.info('stopped');
  return exit.code;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    const message = err instanceof Error ? err.message : String(err);
    process.stderr.write(`xfer-agent: ${message}\n`);
    process.exit(err instanceof UsageError ? 2 : 1);
  },
);
