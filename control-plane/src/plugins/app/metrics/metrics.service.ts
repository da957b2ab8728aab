import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { Models } from '../../../models/index.js';

/** Transfer statuses whose count is a gauge: the ones a transfer leaves (finished ones are counters). */
const ACTIVE_STATUSES = ['queued', 'in-progress'] as const;

/** Seconds; from a cached GET (a few ms) to a blocking execute or a large upload. */
const HTTP_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 120];
/** Seconds; clamd scans a small file in milliseconds and a large one in minutes. */
const SCAN_BUCKETS = [0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60, 300];

/** What MetricsService reads when scraped: the database (transfer counts). */
export interface MetricsServiceOptions {
  db: Models;
}

/** How an upload's scan ended: a verdict, or no verdict (scanner unavailable, too large, aborted). */
export type ScanOutcome = 'clean' | 'infected' | 'error';
/** How a webhook attempt ended: delivered, failed with a retry due, or failed for good. */
export type WebhookOutcome = 'delivered' | 'retrying' | 'failed';
/** How a hosted relay ended (plugins/app/relay/relay.ts RelayOutcome; `finished`: the destination ended it without an error). */
export type RelayEndOutcome = 'finished' | 'ended' | 'stopped' | 'lost' | 'failed';
/** The relays of this instance, read when scraped (plugins/app/relay/). */
export interface RelayStats {
  hosted: number;
  served: number;
  inFlightBytes: number;
}

/**
 * The control plane's Prometheus metrics, in a registry of its own (never prom-client's global
 * one: two apps in one process, as in the tests, would share and double-register it). The other
 * domains report events to it (`httpRequest`, `transferEnded`, `webhookAttempt`, `scanned`);
 * what lives in the database or the agent hub is read when scraped (`render`), never kept here.
 * Labels are closed sets (route patterns, statuses, outcomes): no URL, id, token or file name.
 */
export class MetricsService {
  readonly registry = new Registry();
  /** The content type of `render()`'s text. */
  readonly contentType = this.registry.contentType;
  private agentsOnline: () => number = () => 0;
  private relayStats: () => RelayStats = () => ({ hosted: 0, served: 0, inFlightBytes: 0 });

  private readonly http = new Histogram({
    name: 'xfer_http_request_duration_seconds',
    help: 'HTTP requests answered by this instance, by method, route pattern and status, with their latency',
    labelNames: ['method', 'route', 'status'] as const,
    buckets: HTTP_BUCKETS,
    registers: [this.registry],
  });
  private readonly transfersFinished = new Counter({
    name: 'xfer_transfers_finished_total',
    help: 'Transfer runs that ended on this instance, by final status',
    labelNames: ['status'] as const,
    registers: [this.registry],
  });
  private readonly bytes = new Counter({
    name: 'xfer_transfer_bytes_total',
    help: 'Bytes the agents reported moved by the transfer runs that ended on this instance',
    registers: [this.registry],
  });
  private readonly files = new Counter({
    name: 'xfer_transfer_files_total',
    help: 'Files the agents reported transferred by the transfer runs that ended on this instance',
    registers: [this.registry],
  });
  private readonly takeovers = new Counter({
    name: 'xfer_transfer_takeovers_total',
    help: 'Transfer runs taken over on this instance (agent silent past its lease, run interrupted or refused): the transfer waits for another run',
    registers: [this.registry],
  });
  private readonly webhooks = new Counter({
    name: 'xfer_webhook_deliveries_total',
    help: 'Webhook delivery attempts made by this instance, by outcome',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });
  private readonly relayBytes = new Counter({
    name: 'xfer_relay_bytes_total',
    help: 'Bytes of relayed files (tar stream) this instance forwarded to destination agents',
    registers: [this.registry],
  });
  private readonly relaysEnded = new Counter({
    name: 'xfer_relays_ended_total',
    help: 'Relays hosted by this instance that ended, by outcome (finished, ended by a side with an error, stopped with their run, lost a side, failed)',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });
  private readonly scans = new Histogram({
    name: 'xfer_scan_duration_seconds',
    help: 'Malware scans of uploads on this instance, by outcome, with their latency',
    labelNames: ['outcome'] as const,
    buckets: SCAN_BUCKETS,
    registers: [this.registry],
  });

  constructor(o: MetricsServiceOptions) {
    // Node's process metrics (CPU, memory, event-loop lag, GC, handles), prefixed by prom-client.
    collectDefaultMetrics({ register: this.registry });
    const { db } = o;
    // The queue holds one entry per transfer waiting for an agent (models/transfer-queue.model.ts):
    // counting it costs what waits, never the history.
    new Gauge({
      name: 'xfer_transfer_queue_depth',
      help: 'Transfers waiting for an agent with a free slot (executed, or taken over), all instances',
      registers: [this.registry],
      async collect() {
        this.set(await db.transferQueue.countDocuments({}));
      },
    });
    // Collected at scrape time, one count per active status over the { status, lease.expires_at }
    // index (models/transfer.model.ts): the cost grows with the jobs queued or running, never
    // with the history of finished ones (those are the counters above).
    new Gauge({
      name: 'xfer_transfers',
      help: 'Transfers in each active status, all instances (queued counts those created and not executed too; xfer_transfer_queue_depth counts those waiting for an agent)',
      labelNames: ['status'] as const,
      registers: [this.registry],
      async collect() {
        const counts = await Promise.all(ACTIVE_STATUSES.map((status) => db.transfers.countDocuments({ status })));
        ACTIVE_STATUSES.forEach((status, i) => this.set({ status }, counts[i]!));
      },
    });
    const relays = () => this.relayStats();
    new Gauge({
      name: 'xfer_relays_active',
      help: 'Relays on this instance, by role: host (it holds the destination agent) or peer (it holds the source agent for a host elsewhere)',
      labelNames: ['role'] as const,
      registers: [this.registry],
      collect() {
        const { hosted, served } = relays();
        this.set({ role: 'host' }, hosted);
        this.set({ role: 'peer' }, served);
      },
    });
    new Gauge({
      name: 'xfer_relay_in_flight_bytes',
      help: 'Bytes of relay frames this instance holds sent and not yet taken by the network (bounded per relay by its window)',
      registers: [this.registry],
      collect() {
        this.set(relays().inFlightBytes);
      },
    });
    const online = () => this.agentsOnline();
    new Gauge({
      name: 'xfer_agents_connected',
      help: 'Agents holding a socket on this instance (sum over instances: agents online)',
      registers: [this.registry],
      collect() {
        this.set(online());
      },
    });
  }

  /** Where the relay gauges read from (the relay service, registered after this service). */
  countRelaysWith(stats: () => RelayStats): void {
    this.relayStats = stats;
  }

  /** Relayed bytes forwarded to a destination agent. */
  relayForwarded(bytes: number): void {
    this.relayBytes.inc(bytes);
  }

  /** A relay hosted here ended. */
  relayEnded(outcome: RelayEndOutcome): void {
    this.relaysEnded.inc({ outcome });
  }

  /** Where the agents-online gauge reads from (the agent hub, registered after this service). */
  countAgentsWith(count: () => number): void {
    this.agentsOnline = count;
  }

  /** One answered request; `route` is the route's pattern (`/api/v1/transfers/:id`), never its URL. */
  httpRequest(method: string, route: string, status: number, seconds: number): void {
    this.http.observe({ method, route, status: String(status) }, seconds);
  }

  /** A transfer run ended (the state machine's winning update): its final status and what it moved. */
  transferEnded(status: string, bytes: number, files: number): void {
    this.transfersFinished.inc({ status });
    if (bytes > 0) this.bytes.inc(bytes);
    if (files > 0) this.files.inc(files);
  }

  /** A transfer's run was taken over (TransferStates.interrupt's winning update). */
  transferTakenOver(): void {
    this.takeovers.inc();
  }

  /** A webhook attempt's outcome was recorded. */
  webhookAttempt(outcome: WebhookOutcome): void {
    this.webhooks.inc({ outcome });
  }

  /** An upload's scan ended. */
  scanned(outcome: ScanOutcome, seconds: number): void {
    this.scans.observe({ outcome }, seconds);
  }

  /** The Prometheus text format of every metric. A failed database count fails the scrape (500), not silently zero. */
  render(): Promise<string> {
    return this.registry.metrics();
  }
}
