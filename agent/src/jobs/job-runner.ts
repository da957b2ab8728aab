import type { AgentMessage, PayloadOf, ServerToAgent } from '@xfer/shared';
import { AgentToServer, frame } from '@xfer/shared';
import type { Logger } from 'pino';
import type { ConnectorSource } from '../lib/connector-source.js';
import type { Connector } from '../connectors/types.js';
import { copyTree, SOFT_CUTOFF_ERROR } from '../copy/copy-engine.js';
import { reasonOf } from '../copy/errors.js';
import { truncate } from '../copy/stats.js';
import type { CopyOutcome, CopyTuning, RunLimits } from '../copy/types.js';
import { runPacer, type AgentBandwidth } from '../copy/bandwidth.js';
import { cutoffMessage, planCutoff, RunCutoff, workLeft } from './cutoff.js';
import { countersOf, ZERO_COUNTERS, type Counters } from './payloads.js';
import { ProgressReporter, type ProgressReporterOptions } from './progress-reporter.js';
import type { AgentMetrics, JobEnds } from '../metrics/agent-metrics.js';
import { RelayInterrupted, type RelayDestination } from '../relay/relay-destination.js';
import type { Relays } from '../relay/relays.js';
import { Slots } from './slots.js';
import type { VerifiedLookup } from './verified-lookup.js';
import type { PlanPages } from './plan-pages.js';

export type JobAssign = PayloadOf<typeof ServerToAgent, 'job.assign'>;

/**
 * Why a job's signal was aborted: the control plane cancelled it, the agent is stopping, the
 * relay it reads from broke for a reason that is not the job's, or its window or `max_duration`
 * ended with a hard cutoff (jobs/cutoff.ts).
 */
export type StopReason = 'cancel' | 'shutdown' | 'interrupted' | 'cutoff';

export const SHUTDOWN_ERROR = 'agent shutting down: the job was stopped before it finished; retry it to resume';

export interface JobRunnerOptions {
  /** Jobs run at once; an assign beyond it is refused with `job.failed` "agent busy". */
  maxJobs: number;
  /** The `max_jobs` slots, when other work shares them (the source sides of relays); default: the runner's own. */
  slots?: Slots;
  /** Starts the destination side of relayed jobs (relay/relays.ts); none: a relayed job fails. */
  relays?: Pick<Relays, 'destination'>;
  /** Sends one message to the control plane (the session queues what must not be lost). */
  send: (message: AgentMessage) => void;
  connectors: ConnectorSource;
  log: Logger;
  progress?: ProgressReporterOptions;
  tuning?: Partial<CopyTuning>;
  /** Asks the control plane what earlier attempts verified (resume runs); none: resume follows the overwrite policy alone. */
  verified?: Pick<VerifiedLookup, 'query'>;
  /** Pages through the stored plan of a job assigned with `plan_id` (plan-pages.ts); none: such a job fails. */
  plans?: Pick<PlanPages, 'items'>;
  /** Counts each job's end by status and connector type, relayed ones also as relays (`--metrics-port`); none: not measured. */
  metrics?: Pick<AgentMetrics, 'jobEnded' | 'relayEnded'>;
  /** The agent's bandwidth timetable (`--bwlimit`), shared by all its runs; none: only each run's own limit. */
  bandwidth?: AgentBandwidth | null;
}

interface RunningJob {
  id: string;
  controller: AbortController;
  reason: StopReason | null;
  /** What interrupted it (reason `interrupted`). */
  interruption: string | null;
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
  private readonly slots: Slots;

  constructor(private readonly o: JobRunnerOptions) {
    this.slots = o.slots ?? new Slots(o.maxJobs);
  }

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
    if (!this.slots.take()) {
      log.warn({ job_id: job.job_id, max_jobs: this.slots.max }, 'job refused: agent busy');
      this.send('job.failed', { job_id: job.job_id, ...ZERO_COUNTERS, error: this.slots.busyMessage() });
      return;
    }
    const running: RunningJob = { id: job.job_id, controller: new AbortController(), reason: null, interruption: null, done: Promise.resolve() };
    this.jobs.set(job.job_id, running);
    running.done = this.run(running, job)
      .catch((err: unknown) => {
        // run() reports every outcome itself; this is a bug in reporting: the job fails, the agent goes on.
        log.error({ err, job_id: job.job_id }, 'job ended with an unexpected error');
        this.send('job.failed', { job_id: job.job_id, ...ZERO_COUNTERS, error: `agent error: ${truncate(reasonOf(err), 3000)}` });
      })
      .finally(() => {
        this.jobs.delete(job.job_id);
        this.slots.release();
      });
  }

  /** Aborts a running job (`why`: what interrupted it); false when no such job runs here. */
  stop(jobId: string, reason: StopReason, why?: string): boolean {
    const job = this.jobs.get(jobId);
    if (!job) return false;
    // The first reason stands, but a cancel beats an interruption not reported yet: the user's word is final.
    if (reason === 'cancel' && job.reason === 'interrupted') job.reason = 'cancel';
    job.reason ??= reason;
    if (job.reason === 'interrupted') job.interruption ??= why ?? 'interrupted';
    const message = { cancel: 'job cancelled', shutdown: 'agent shutting down', cutoff: 'run cut off', interrupted: `interrupted: ${why ?? ''}` }[reason];
    job.controller.abort(new Error(message));
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
    const ends = { source: sourceType, destination: assign.destination.type };
    const relayed = assign.relay !== undefined;
    const nothingDone = { ...ZERO_COUNTERS, listing_done: false };
    let cutoff: RunCutoff;
    try {
      cutoff = new RunCutoff(planCutoff(assign.options, Date.now()));
    } catch (err) {
      this.report(job, { status: 'failed', counters: nothingDone, error: reasonOf(err) }, log, ends, relayed, assign.options, null);
      return;
    }
    if (cutoff.plan.outsideUntil !== null) {
      // Started outside its window: nothing runs (report() says when it opens); the next run resumes.
      this.report(job, { status: 'failed', counters: nothingDone }, log, ends, relayed, assign.options, cutoff);
      return;
    }
    // A hard cutoff aborts the run like a cancel (the engine removes partial files); a soft one only stops new files (mayStart).
    cutoff.arm(() => this.stop(job.id, 'cutoff'));
    const limits: RunLimits = {
      pace: runPacer(assign.options.bandwidth_limit, this.o.bandwidth ?? null),
      mayStart: () => cutoff.mayStart(),
    };
    const reporter = new ProgressReporter(job.id, (payload) => this.send('job.progress', payload), this.o.progress);
    const opened: Connector[] = [];
    let relay: RelayDestination | null = null;
    let outcome: CopyOutcome | null = null;
    try {
      if (assign.plan_id !== undefined && !this.o.plans) throw new Error('this agent cannot apply plans');
      const common = {
        destinationPath: assign.destination_path, options: assign.options, resume: assign.resume,
        ...(assign.plan_id !== undefined ? { plan: this.o.plans!.items(job.id, job.controller.signal) } : {}),
        askVerified: assign.resume && this.o.verified ? (paths: string[], signal: AbortSignal) => this.o.verified!.query(job.id, paths, signal) : undefined,
        run: { jobId: job.id, attempt: assign.attempt }, signal: job.controller.signal, observer: reporter, tuning: this.o.tuning, limits,
      };
      if (assign.relay) {
        // The destination side of a relay: the source agent lists and reads, through the control plane.
        if (!this.o.relays) throw new Error('this agent cannot be the destination of a relayed job');
        // The source agent would have to delete each file once this side verified it: not done (docs/agent.md "Sync, move and plans").
        if (assign.options.mode === 'move') throw new Error('move is not supported through a relay: run it on an agent that serves both connections, or copy and delete the source with a workflow');
        if (assign.plan_id !== undefined) throw new Error('a plan is applied on an agent that serves both connections, not through a relay');
        relay = this.o.relays.destination({
          jobId: job.id, attempt: assign.attempt, concurrency: assign.options.concurrency, log,
          onInterrupted: (err) => this.stop(job.id, 'interrupted', err.message),
        });
        const destination = await this.o.connectors.create(assign.destination);
        opened.push(destination);
        reporter.start();
        outcome = await copyTree({ ...common, items: relay.items(), destination }, log);
      } else {
        if (!assign.source) throw new Error('a job.assign without relay must name its source');
        // Both at once: each may load its connector's library on first use.
        const created = await Promise.allSettled([this.o.connectors.create(assign.source), this.o.connectors.create(assign.destination)]);
        for (const c of created) if (c.status === 'fulfilled') opened.push(c.value);
        for (const c of created) if (c.status === 'rejected') throw c.reason;
        const [source, destination] = opened as [Connector, Connector];
        reporter.start();
        outcome = await copyTree({ ...common, source, sourcePath: assign.source_path, destination }, log);
      }
    } catch (err) {
      // copyTree never rejects: this is a connector that could not even be built (unsupported type,
      // bad settings), or a relay that could not start because the session was lost.
      if (err instanceof RelayInterrupted) this.stop(job.id, 'interrupted', err.message);
      outcome = { status: job.reason === 'interrupted' ? 'cancelled' : 'failed', counters: { ...ZERO_COUNTERS, listing_done: false }, error: reasonOf(err) };
    } finally {
      cutoff.disarm();
      reporter.stop();
      // The source side stops at once (it also would when the relay ends some other way).
      relay?.finish(outcome === null || outcome.status === 'completed' ? undefined : outcome.status === 'cancelled' ? `job stopped: ${job.reason ?? 'cancel'}` : truncate(outcome.error ?? 'failed', 4000));
      await Promise.all(opened.map((c) => c.close().catch((e: unknown) => log.warn({ err: reasonOf(e) }, 'closing a connector failed'))));
    }
    this.report(job, outcome, log, ends, relayed, assign.options, cutoff);
  }

  private report(job: RunningJob, outcome: CopyOutcome, log: Logger, ends: JobEnds, relayed: boolean, options: JobAssign['options'], cutoff: RunCutoff | null): void {
    const counters: Counters = countersOf(outcome.counters);
    // Cut off: outside its window from the start, hard (aborted at the cutoff) or soft (no file started after it, and some were left).
    const cutShort = cutoff !== null && (cutoff.plan.outsideUntil !== null || (job.reason === 'cutoff' ? outcome.status === 'cancelled'
      : job.reason === null && cutoff.plan.mode === 'soft' && outcome.status !== 'cancelled' && cutoff.passed() && workLeft(outcome.counters)));
    if (cutoff && cutShort && cutoff.plan.cause) {
      const status = 'failed';
      this.o.metrics?.jobEnded(status, ends, counters);
      if (relayed) this.o.metrics?.relayEnded('destination', ends.source, status);
      const failures = outcome.status === 'failed' && outcome.error && outcome.error !== SOFT_CUTOFF_ERROR ? `; ${outcome.error}` : '';
      const error = truncate(cutoffMessage(cutoff.plan, options, outcome.counters) + failures, 4000);
      log.warn({ ...counters, error, cutoff: cutoff.plan.cause }, 'job cut off');
      this.send('job.failed', { job_id: job.id, ...counters, error, cutoff: cutoff.plan.cause });
      return;
    }
    // Stopped for a reason that is not the job's: another run takes over and resumes (job.failed.interrupted).
    const interrupted = outcome.status === 'cancelled' && (job.reason === 'shutdown' || job.reason === 'interrupted');
    const status = interrupted ? 'failed' : outcome.status;
    this.o.metrics?.jobEnded(status, ends, counters);
    if (relayed) this.o.metrics?.relayEnded('destination', ends.source, status);
    if (interrupted && job.reason === 'shutdown') {
      log.warn(counters, 'job stopped: agent shutting down');
      this.send('job.failed', { job_id: job.id, ...counters, error: SHUTDOWN_ERROR, interrupted: true });
    } else if (interrupted) {
      const error = truncate(`relay interrupted: ${job.interruption ?? 'unknown cause'}`, 4000);
      log.warn({ ...counters, error }, 'job interrupted: its relay broke');
      this.send('job.failed', { job_id: job.id, ...counters, error, interrupted: true });
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
