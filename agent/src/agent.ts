import { createHash } from 'node:crypto';
import { AgentToServer, frame, type AgentMessage, type ConnectionSettings, type PayloadOf } from '@xfer/shared';
import type { Logger } from 'pino';
import type { CopyTuning } from './copy/types.js';
import { closedAccess, type AgentAccess } from './connectors/access.js';
import { openKeptTimes } from './connectors/kept-times.js';
import { JobRunner } from './jobs/job-runner.js';
import { AgentBandwidth, type BandwidthTimetable } from './copy/bandwidth.js';
import { Slots } from './jobs/slots.js';
import { VerifiedLookup } from './jobs/verified-lookup.js';
import { PlanPages } from './jobs/plan-pages.js';
import { PlanRunner } from './jobs/plan-runner.js';
import type { AgentMetrics } from './metrics/agent-metrics.js';
import { reasonOf } from './copy/errors.js';
import { truncate } from './copy/stats.js';
import { ZERO_COUNTERS } from './jobs/payloads.js';
import type { ProgressReporterOptions } from './jobs/progress-reporter.js';
import { registryConnectors, reportingCredentials, type ConnectorSource } from './lib/connector-source.js';
import { Relays } from './relay/relays.js';
import { testConnection } from './session/connection-test.js';
import { settleSourceFiles, type SettleReply } from './session/source-settle.js';
import { spillDir } from './session/report-queue.js';
import { AgentSession, type SessionMessage, type SessionOptions, type Welcome } from './session/session.js';
import { WatchRunner, type WatchRunnerOptions } from './watch/index.js';

export interface AgentOptions {
  /** `ws(s)://…/api/v1/agents/connect` (see `connectUrl`), or one per control-plane instance (dialed in turn: AgentSession). */
  url: string | readonly string[];
  token: string;
  version: string;
  hostname: string;
  maxJobs: number;
  /** Pools the operator put the agent in (`--label`), announced in `hello.labels`. */
  labels?: string[];
  /** How long a SIGTERM lets running jobs finish before aborting them. */
  drainTimeoutMs: number;
  log: Logger;
  connectors?: ConnectorSource;
  /** Local directories and hosts the agent's owner allows (config: allow_roots, allow_hosts, deny_hosts); default none and the default host rules. */
  access?: AgentAccess;
  /** Bound on `connector.test()` for `connection.test` (default 20 s). */
  connectionTestTimeoutMs?: number;
  /** Bound on one `source.settle` (default 9 minutes: within the control plane's 10-minute wait, so the answer still counts). */
  settleTimeoutMs?: number;
  /**
   * The state directory (config.ts `stateDir`): job reports past `outboxMemoryBytes` are spilled
   * under it, and the index of kept modification times lives there (connectors/kept-times.ts).
   */
  stateDir?: string | null;
  outboxMemoryBytes?: number;
  /** Session knobs (backoff, stable time, handshake timeout); tests shorten them. */
  session?: Pick<SessionOptions, 'reconnectBaseMs' | 'reconnectMaxMs' | 'stableAfterMs' | 'handshakeTimeoutMs' | 'random'>;
  progress?: ProgressReporterOptions;
  tuning?: Partial<CopyTuning>;
  /** How long a resume run waits for the control plane's answer on earlier attempts' results (default 10 s). */
  verifiedQueryTimeoutMs?: number;
  /** The agent's metrics (`--metrics-port`), fed by the job runner; none: not measured. */
  metrics?: AgentMetrics;
  /** The agent-wide bandwidth timetable (`--bwlimit`), shared by all its runs; none: each run's own limit alone. */
  bwlimit?: BandwidthTimetable | null;
  /** Watcher polling knobs (concurrent polls; tests shorten the waits). */
  watch?: Pick<WatchRunnerOptions, 'maxConcurrentPolls' | 'firstPollDelayMs' | 'pollIntervalMs'>;
}

/** How the agent ended: 0 after a clean stop, 3 when the control plane refused it for good. */
export type AgentExit = { code: 0 } | { code: 3; reason: string };

/** How long, after the jobs drained, the last reports may take to reach the control plane. */
const FINAL_FLUSH_MS = 5000;
/**
 * Connection tests run at once, at most: each opens a connection to a server. More requests than
 * this (a control plane that floods them) are answered at once with a failure.
 */
export const MAX_CONNECTION_TESTS = 8;
/**
 * `source.settle` requests carried out at once, at most (each settles a few files at a time:
 * SETTLE_CONCURRENCY). More are answered at once with a whole-request `error`; the control plane
 * sends them again later.
 */
export const MAX_SOURCE_SETTLES = 4;
const DEFAULT_SETTLE_TIMEOUT_MS = 9 * 60_000;

/**
 * The agent daemon: one session with the control plane, one job runner, the relays it plays a
 * side of, the watchers it polls, and the replies to the control plane's requests. Jobs and the
 * source sides of relays share the `max_jobs` slots; watcher polls have their own bound
 * (WatchRunner). `run` resolves when `shutdown` finished or the token was refused.
 */
export class Agent {
  private readonly session: AgentSession;
  private readonly runner: JobRunner;
  private readonly relays: Relays;
  private readonly watches: WatchRunner;
  private readonly verified: VerifiedLookup;
  private readonly planPages: PlanPages;
  private readonly plans: PlanRunner;
  private readonly connectors: ConnectorSource;
  private shuttingDown: Promise<void> | null = null;
  private connectionTests = 0;
  private sourceSettles = 0;
  /** Aborted at shutdown: settles in flight answer what they finished and `failed` for the rest. */
  private readonly settling = new AbortController();

  constructor(private readonly o: AgentOptions) {
    this.connectors = reportingCredentials(
      o.connectors ?? registryConnectors, (settings, credentials, previous) => this.credentialsRotated(settings, credentials, previous), o.access ?? closedAccess(),
      o.stateDir ? openKeptTimes(o.stateDir, o.log) : null,
    );
    this.session = new AgentSession({
      ...o.session,
      url: o.url,
      token: o.token,
      log: o.log,
      spillDir: o.stateDir ? spillDir(o.stateDir, o.log) : null,
      outboxMemoryBytes: o.outboxMemoryBytes,
      hello: () => ({
        version: o.version, hostname: o.hostname, connector_types: this.connectors.types(),
        running_jobs: this.runner.runningJobIds(), max_jobs: o.maxJobs, watch: true, settle: true, sync: true,
        ...(o.labels && o.labels.length > 0 ? { labels: o.labels } : {}),
      }),
      onWelcome: (welcome) => this.welcome(welcome),
      onMessage: (message) => this.handle(message),
      relay: { onChunk: (chunk) => this.relays.chunk(chunk) },
    });
    const slots = new Slots(o.maxJobs);
    this.relays = new Relays({ link: () => this.session.relayLink, connectors: this.connectors, slots, log: o.log, metrics: o.metrics });
    this.verified = new VerifiedLookup({ send: (m) => this.session.send(m), timeoutMs: o.verifiedQueryTimeoutMs });
    this.planPages = new PlanPages({ send: (m) => this.session.send(m) });
    this.plans = new PlanRunner({ link: this.session, connectors: this.connectors, log: o.log });
    this.runner = new JobRunner({
      maxJobs: o.maxJobs, slots, relays: this.relays, send: (m) => this.session.send(m), verified: this.verified, plans: this.planPages, connectors: this.connectors, log: o.log,
      progress: o.progress, tuning: o.tuning, metrics: o.metrics, bandwidth: o.bwlimit ? new AgentBandwidth(o.bwlimit) : null,
    });
    this.watches = new WatchRunner({
      ...o.watch, connectors: this.connectors, send: (m) => this.session.send(m), connected: () => this.session.connected, log: o.log,
    });
    o.metrics?.countRunningWith(() => this.runner.runningJobIds().length);
  }

  async run(): Promise<AgentExit> {
    const end = await this.session.run();
    if (end.kind === 'terminal') {
      // Nobody will take these jobs' reports any more; stop them so nothing partial is left behind.
      this.plans.stopAll();
      await Promise.all([this.runner.stopAll('shutdown'), this.relays.stopAll('agent shutting down'), this.watches.stop()]);
      return { code: 3, reason: end.reason };
    }
    await this.shuttingDown;
    return { code: 0 };
  }

  /**
   * Graceful stop: abort the watcher polls (the next agent to poll them starts from the control
   * plane's `report_since`), take no new jobs or relays, let running ones finish for
   * `drainTimeoutMs` (then abort them: jobs report job.failed "agent shutting down" with
   * `interrupted`, relay source sides end theirs), give the last reports a moment to get out,
   * close the socket with 1000.
   * Idempotent; `immediately` skips the wait for running jobs.
   */
  shutdown(reason: string, immediately = false): Promise<void> {
    if (this.shuttingDown && !immediately) return this.shuttingDown;
    this.o.log.info({ reason, running_jobs: this.runner.runningJobIds().length, relays_serving: this.relays.serving }, 'shutting down');
    this.settling.abort();
    // A plan writes nothing: stopped at once (the control plane fails it with the session).
    this.plans.stopAll();
    const timeoutMs = immediately ? 0 : this.o.drainTimeoutMs;
    const drain = Promise.all([this.runner.drain(timeoutMs), this.relays.drain(timeoutMs), this.watches.stop()]);
    this.shuttingDown = (async () => {
      await drain;
      if (!(await this.session.flushed(FINAL_FLUSH_MS))) this.o.log.warn('some job reports could not be delivered before exit');
      await this.session.stop();
    })();
    return this.shuttingDown;
  }

  private welcome(welcome: Welcome): void {
    this.verified.sessionOpened(welcome.verified_lookup === true);
    this.planPages.sessionOpened();
    for (const id of welcome.abort_jobs) {
      if (this.runner.stop(id, 'cancel')) this.o.log.info({ job_id: id }, 'aborting a job the control plane no longer wants');
    }
    this.watches.resume();
  }

  /**
   * One message of the control plane. Whatever it holds, a failure here fails only what the
   * message is about (a `job.assign` is answered with `job.failed`); the session and the other
   * jobs go on.
   */
  private handle(message: SessionMessage): void {
    try {
      this.dispatch(message);
    } catch (err) {
      this.o.log.error({ err, type: message.type }, 'handling a message from the control plane failed');
      if (message.type === 'job.assign') {
        this.send('job.failed', { job_id: message.payload.job_id, ...ZERO_COUNTERS, error: `the agent could not start the job: ${truncate(reasonOf(err), 3000)}` });
      }
    }
  }

  private dispatch(message: SessionMessage): void {
    switch (message.type) {
      case 'ping':
        this.send('pong', { request_id: message.payload.request_id });
        return;
      case 'job.assign':
        this.runner.assign(message.payload);
        return;
      case 'job.verified':
        this.verified.answered(message.payload);
        return;
      case 'plan.assign':
        this.plans.assign(message.payload);
        return;
      case 'plan.cancel':
        this.plans.cancel(message.payload.plan_id);
        return;
      case 'job.plan.page':
        this.planPages.answered(message.payload);
        return;
      case 'watch.set':
        this.watches.apply(message.payload);
        return;
      case 'job.cancel': {
        const jobId = message.payload.job_id;
        if (this.runner.stop(jobId, 'cancel')) return;
        // The source side of its relay: its relay.end is the answer (the destination reports the job).
        if (this.relays.stopSources(jobId, 'job cancelled')) return;
        // Unknown here (finished already, or never arrived): nothing runs, so the cancel is done.
        this.send('job.cancelled', { job_id: jobId, ...ZERO_COUNTERS });
        return;
      }
      case 'relay.source':
      case 'relay.credit':
      case 'relay.want':
      case 'relay.entries':
      case 'relay.end':
        this.relays.message(message);
        return;
      case 'connection.test': {
        const { request_id, connection } = message.payload;
        if (this.connectionTests >= MAX_CONNECTION_TESTS) {
          this.send('connection.test.result', { request_id, success: false, message: `agent busy: already testing ${MAX_CONNECTION_TESTS} connections`, latency_ms: 0 });
          return;
        }
        this.connectionTests++;
        void testConnection(this.connectors, connection, this.o.connectionTestTimeoutMs ?? 20_000).then((result) => {
          this.o.log.info({ connection_id: connection.id, type: connection.type, success: result.success, latency_ms: result.latency_ms }, 'connection tested');
          this.send('connection.test.result', { request_id, ...result });
        }).catch((err: unknown) => this.o.log.error({ err }, 'answering a connection test failed'))
          .finally(() => this.connectionTests--);
        return;
      }
      case 'source.settle':
        this.settle(message.payload);
        return;
    }
  }

  /**
   * Moves or deletes a transfer's verified source files (settle-protocol.ts) and answers with
   * what became of each; beyond MAX_SOURCE_SETTLES at once, answers busy for the whole request.
   * The log line holds counts, never paths or credentials.
   */
  private settle(payload: Extract<SessionMessage, { type: 'source.settle' }>['payload']): void {
    const { request_id, connection, ...request } = payload;
    if (this.sourceSettles >= MAX_SOURCE_SETTLES) {
      this.send('source.settle.result', { request_id, results: [], error: `agent busy: already settling ${MAX_SOURCE_SETTLES} batches of files` });
      return;
    }
    this.sourceSettles++;
    void settleSourceFiles(this.connectors, { connection, ...request }, { signal: this.settling.signal, timeoutMs: this.o.settleTimeoutMs ?? DEFAULT_SETTLE_TIMEOUT_MS })
      .then((reply) => {
        this.o.log.info({ request_id, connection_id: connection.id, type: connection.type, action: request.action, files: request.files.length, ...outcomeCounts(reply), ...(reply.error ? { error: reply.error } : {}) }, 'source files settled');
        this.send('source.settle.result', { request_id, ...reply });
      }).catch((err: unknown) => this.o.log.error({ err }, 'answering a source.settle failed'))
      .finally(() => this.sourceSettles--);
  }

  /**
   * A connector's service rotated credentials (a OneDrive refresh token): the control plane
   * stores them for the connection's next use. The replaced values go out only as SHA-256, for
   * the control plane to check it replaces what it holds; the log names the fields, never values.
   */
  private credentialsRotated(settings: ConnectionSettings, credentials: Record<string, string>, previous: Record<string, string>): void {
    const previousSha256 = Object.fromEntries(Object.entries(previous).map(([field, value]) => [field, createHash('sha256').update(value).digest('hex')]));
    this.o.log.info({ connection_id: settings.id, type: settings.type, fields: Object.keys(credentials) }, 'credentials rotated by the service: sending them to the control plane');
    this.send('connection.credentials', { connection_id: settings.id, credentials, previous_sha256: previousSha256 });
  }

  private send<T extends keyof typeof AgentToServer & string>(type: T, payload: PayloadOf<typeof AgentToServer, T>): void {
    this.session.send(frame(AgentToServer, type, payload) as AgentMessage);
  }
}

/** How many files of a settle reply ended each way (for the log line). */
function outcomeCounts(reply: SettleReply): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const r of reply.results) counts[r.outcome] = (counts[r.outcome] ?? 0) + 1;
  return counts;
}
