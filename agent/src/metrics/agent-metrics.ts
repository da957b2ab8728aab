import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';
import type { Counters } from '../jobs/payloads.js';

/** How a job ended on this agent, as reported to the control plane. */
export type JobEnd = 'completed' | 'failed' | 'cancelled';

/** The connector types of a job's two ends (`sftp`, `s3`, …): a closed set, never a host or a path. */
export interface JobEnds {
  source: string;
  destination: string;
}

/**
 * The agent's Prometheus metrics (`--metrics-port`), in a registry of its own: jobs running (read
 * from the job runner when scraped), jobs ended by status, bytes and files moved and jobs failed
 * by connector type, relays by role, and Node's process metrics. Labels are connector types and statuses only:
 * no job id, host, path or credential.
 */
export class AgentMetrics {
  readonly registry = new Registry();
  readonly contentType = this.registry.contentType;
  private running: () => number = () => 0;

  private readonly ended = new Counter({
    name: 'xfer_agent_jobs_finished_total', help: 'Jobs this agent ran to an end, by status',
    labelNames: ['status'] as const, registers: [this.registry],
  });
  private readonly bytes = new Counter({
    name: 'xfer_agent_bytes_total', help: 'Bytes written by the jobs that ended, by source and destination connector type',
    labelNames: ['source', 'destination'] as const, registers: [this.registry],
  });
  private readonly files = new Counter({
    name: 'xfer_agent_files_total', help: 'Files of the jobs that ended, by connector types and outcome (transferred, skipped, failed)',
    labelNames: ['source', 'destination', 'outcome'] as const, registers: [this.registry],
  });
  private readonly relays = new Counter({
    name: 'xfer_agent_relays_finished_total',
    help: 'Relayed jobs this agent played a side of, by role (destination: wrote; source: read and sent), source connector type and status',
    labelNames: ['role', 'source', 'status'] as const, registers: [this.registry],
  });
  private readonly relayBytes = new Counter({
    name: 'xfer_agent_relay_bytes_sent_total', help: 'Tar bytes this agent sent as the source side of relays, by source connector type',
    labelNames: ['source'] as const, registers: [this.registry],
  });
  private readonly errors = new Counter({
    name: 'xfer_agent_job_errors_total', help: 'Jobs that ended failed, by source and destination connector type',
    labelNames: ['source', 'destination'] as const, registers: [this.registry],
  });

  constructor() {
    collectDefaultMetrics({ register: this.registry });
    const running = () => this.running();
    new Gauge({
      name: 'xfer_agent_jobs_running', help: 'Jobs running on this agent now', registers: [this.registry],
      collect() {
        this.set(running());
      },
    });
  }

  /** Where the running-jobs gauge reads from (the job runner). */
  countRunningWith(count: () => number): void {
    this.running = count;
  }

  /** A job ended (the report sent to the control plane): its status and counters. */
  jobEnded(status: JobEnd, ends: JobEnds, counters: Counters): void {
    const { source, destination } = ends;
    this.ended.inc({ status });
    if (status === 'failed') this.errors.inc({ source, destination });
    if (counters.bytes_transferred > 0) this.bytes.inc({ source, destination }, counters.bytes_transferred);
    const outcomes = { transferred: counters.files_transferred, skipped: counters.files_skipped, failed: counters.files_failed };
    for (const [outcome, n] of Object.entries(outcomes)) if (n > 0) this.files.inc({ source, destination, outcome }, n);
  }

  /**
   * A side of a relayed job ended: the destination (its job's end, also counted by `jobEnded`) or
   * the source (completed when the destination ended it without error), and the tar bytes a
   * source side sent.
   */
  relayEnded(role: 'destination' | 'source', source: string, status: JobEnd, bytesSent = 0): void {
    this.relays.inc({ role, source, status });
    if (bytesSent > 0) this.relayBytes.inc({ source }, bytesSent);
  }

  /** The Prometheus text format of every metric (served by @xfer/shared's listenMetrics). */
  render(): Promise<string> {
    return this.registry.metrics();
  }
}
