import type { AgentMessage, PayloadOf, ServerToAgent } from '@xfer/shared';
import { AgentToServer, frame } from '@xfer/shared';
import type { Logger } from 'pino';
import type { ConnectorSource } from '../lib/connector-source.js';
import type { Connector } from '../connectors/types.js';
import { copyTree } from '../copy/copy-engine.js';
import { reasonOf } from '../copy/errors.js';
import { truncate } from '../copy/stats.js';
import type { CopyOutcome, CopyTuning } from '../copy/types.js';
import { countersOf, ZERO_COUNTERS, type Counters } from './payloads.js';
import { ProgressReporter, type ProgressReporterOptions } from './progress-reporter.js';
import type { AgentMetrics, JobEnds } from '../metrics/agent-metrics.js';
import type { VerifiedLookup } from './verified-lookup.js';

export type JobAssign = PayloadOf<typeof ServerToAgent, 'job.assign'>;

/** Why a job's signal was aborted: the control plane cancelled it, or the agent is stopping. */
export type StopReason = 'cancel' | 'shutdown';

export const SHUTDOWN_ERROR = 'agent shutting down: the job was stopped before it finished; retry it to resume';

export interface JobRunnerOptions {
  /** Jobs run at once; an assign beyond it is refused with `job.failed` "agent busy". */
  maxJobs: number;
  /** Sends one message to the control plane (the session queues what must not be lost). */
  send: (message: AgentMessage) => void;
  connectors: ConnectorSource;
  log: Logger;
  progress?: ProgressReporterOptions;
  tuning?: Partial<CopyTuning>;
  /** Asks the control plane what earlier attempts verified (resume runs); none: resume follows the overwrite policy alone. */
  verified?: Pick<VerifiedLookup, 'query'>;
  /** Counts each job's end by status and connector type (`--metrics-port`); none: not measured. */
  metrics?: Pick<AgentMetrics, 'jobEnded'>;
}

interface RunningJob {
  id: string;
  controller: AbortController;
  reason: StopReason | null;
  done: Promise<void>;
}

/**
 * Runs assigned jobs, at most `maxJobs` at once, each under its own AbortController, and reports
 * each one as `job.accepted` → `job.progress`… → exactly one of `job.completed`, `job.failed`,
 * `job.cancelled`.
 *
 * Refusals are immediate `job.failed` messages without `job.accepted`: "agent busy" when
 * `maxJobs` run already (the control plane knows `max_jobs` from `hello` and should not get
 * there), "agent shutting down" once a drain began. An assign for a job already running here
 * (a re-send after a reconnect) is acknowledged again and otherwise ignored.
 */
export class JobRunner {
  private readonly jobs = new Map<string, RunningJob>();
  private accepting = true;

  constructor(private readonly o: JobRunnerOptions) {}

  runningJobIds(): string[] {
    return [...this.jobs.keys()];
  }

  assign(job: JobAssign): void {
    const { log } = this.o;
    if (this.jobs.has(job.job_id)) {
      log.warn({ job_id: job.job_id }, 'job assigned again while running; acknowledging');
      this.send('job.accepted', { job_id: job.job_id });
      return;
    }
    if (!this.accepting) {
      this.send('job.failed', { job_id: job.job_id, ...ZERO_COUNTERS, error: 'agent shutting down: not taking new jobs' });
      return;
    }
    if (this.jobs.size >= this.o.maxJobs) {
      log.warn({ job_id: job.job_id, max_jobs: this.o.maxJobs }, 'job refused: agent busy');
      this.send('job.failed', { job_id: job.job_id, ...ZERO_COUNTERS, error: `agent busy: already running ${this.jobs.size} of max_jobs ${this.o.maxJobs}` });
      return;
    }
    const running: RunningJob = { id: job.job_id, controller: new AbortController(), reason: null, done: Promise.resolve() };
    this.jobs.set(job.job_id, running);
    running.done = this.run(running, job)
      .catch((err: unknown) => {
        // run() reports every outcome itself; this is a bug in reporting: the job fails, the agent goes on.
        log.error({ err, job_id: job.job_id }, 'job ended with an unexpected error');
        this.send('job.failed', { job_id: job.job_id, ...ZERO_COUNTERS, error: `agent error: ${truncate(reasonOf(err), 3000)}` });
      })
      .finally(() => this.jobs.delete(job.job_id));
  }

  /** Aborts a running job; false when no such job runs here. */
  stop(jobId: string, reason: StopReason): boolean {
    const job = this.jobs.get(jobId);
    if (!job) return false;
    job.reason ??= reason;
    job.controller.abort(new Error(reason === 'cancel' ? 'job cancelled' : 'agent shutting down'));
    return true;
  }

  /** Aborts every running job and waits until each has reported. */
  async stopAll(reason: StopReason): Promise<void> {
    for (const id of this.jobs.keys()) this.stop(id, reason);
    await Promise.all([...this.jobs.values()].map((j) => j.done));
  }

  /**
   * Stops taking jobs, lets the running ones finish for up to `timeoutMs`, then aborts the rest
   * (they report `job.failed` "agent shutting down") and waits for their reports.
   */
  async drain(timeoutMs: number): Promise<void> {
    this.accepting = false;
    if (this.jobs.size === 0) return;
    this.o.log.info({ running: this.jobs.size, timeout_ms: timeoutMs }, 'draining: waiting for running jobs');
    let timer: NodeJS.Timeout | undefined;
    const timedOut = await Promise.race([
      Promise.all([...this.jobs.values()].map((j) => j.done)).then(() => false),
      new Promise<boolean>((resolve) => { timer = setTimeout(() => resolve(true), timeoutMs); }),
    ]);
    clearTimeout(timer);
    if (timedOut) {
      this.o.log.warn({ running: this.jobs.size }, 'drain timeout reached: stopping the remaining jobs');
      await this.stopAll('shutdown');
    }
  }

  private async run(job: RunningJob, assign: JobAssign): Promise<void> {
    const log = this.o.log.child({ job_id: job.id });
    this.send('job.accepted', { job_id: job.id });
    const sourceType = assign.source?.type ?? assign.relay?.source_type ?? 'unknown';
    log.info({ attempt: assign.attempt, source: sourceType, destination: assign.destination.type, resume: assign.resume }, 'job started');
    const reporter = new ProgressReporter(job.id, (payload) => this.send('job.progress', payload), this.o.progress);
    const opened: Connector[] = [];
    let outcome: CopyOutcome | null = null;
    try {
      // This agent does not announce relays (hello.relay), so no control plane sends it one.
      if (!assign.source) throw new Error('this agent cannot be the destination of a relayed job');
      // Both at once: each may load its connector's library on first use.
      const created = await Promise.allSettled([this.o.connectors.create(assign.source), this.o.connectors.create(assign.destination)]);
      for (const c of created) if (c.status === 'fulfilled') opened.push(c.value);
      for (const c of created) if (c.status === 'rejected') throw c.reason;
      const [source, destination] = opened as [Connector, Connector];
      reporter.start();
      outcome = await copyTree({
        source, sourcePath: assign.source_path, destination, destinationPath: assign.destination_path,
        options: assign.options, resume: assign.resume,
        askVerified: assign.resume && this.o.verified ? (paths, signal) => this.o.verified!.query(job.id, paths, signal) : undefined,
        run: { jobId: job.id, attempt: assign.attempt }, signal: job.controller.signal, observer: reporter, tuning: this.o.tuning,
      }, log);
    } catch (err) {
      // copyTree never rejects: this is a connector that could not even be built (unsupported type, bad settings).
      outcome = { status: 'failed', counters: { ...ZERO_COUNTERS, listing_done: false }, error: reasonOf(err) };
    } finally {
      reporter.stop();
      await Promise.all(opened.map((c) => c.close().catch((e: unknown) => log.warn({ err: reasonOf(e) }, 'closing a connector failed'))));
    }
    this.report(job, outcome, log, { source: sourceType, destination: assign.destination.type });
  }

  private report(job: RunningJob, outcome: CopyOutcome, log: Logger, ends: JobEnds): void {
    const counters: Counters = countersOf(outcome.counters);
    const shutdown = outcome.status === 'cancelled' && job.reason === 'shutdown';
    this.o.metrics?.jobEnded(shutdown ? 'failed' : outcome.status, ends, counters);
    if (shutdown) {
      log.warn(counters, 'job stopped: agent shutting down');
      this.send('job.failed', { job_id: job.id, ...counters, error: SHUTDOWN_ERROR });
    } else if (outcome.status === 'cancelled') {
      log.info(counters, 'job cancelled');
      this.send('job.cancelled', { job_id: job.id, ...counters });
    } else if (outcome.status === 'failed') {
      const error = truncate(outcome.error ?? 'failed', 4000);
      log.warn({ ...counters, error }, 'job failed');
      this.send('job.failed', { job_id: job.id, ...counters, error });
    } else {
      log.info(counters, 'job completed');
      this.send('job.completed', { job_id: job.id, ...counters });
    }
  }

  private send<T extends keyof typeof AgentToServer & string>(type: T, payload: PayloadOf<typeof AgentToServer, T>): void {
    this.o.send(frame(AgentToServer, type, payload) as AgentMessage);
  }
}
