import {
  AgentToServer, frame, MAX_FOUND_PER_REPORT, MAX_FRAME_BYTES,
  type AgentMessage, type AssignedWatcher, type FoundFile, type PayloadOf, type ServerToAgent,
} from '@xfer/shared';
import type { Logger } from 'pino';
import type { Connector } from '../connectors/types.js';
import { reasonOf } from '../copy/errors.js';
import { truncate } from '../copy/stats.js';
import type { ConnectorSource } from '../lib/connector-source.js';
import { FolderWatch, WatchSpecError, type FileVersion, type PollSummary } from './folder-watch.js';

export type WatchSet = PayloadOf<typeof ServerToAgent, 'watch.set'>;
type Polled = PayloadOf<typeof AgentToServer, 'watch.polled'>;

export interface WatchRunnerOptions {
  /**
   * The agent's connector source, the one its jobs use: it applies what the agent's owner allows
   * (allow_roots, allow_hosts, deny_hosts), so a watcher reaches nothing a job could not.
   */
  connectors: ConnectorSource;
  /** The session's `send`: `watch.found` is numbered and held until acknowledged, `watch.polled` is not. */
  send: (message: AgentMessage) => void;
  /** Whether the session is open: no poll starts while it is not. */
  connected: () => boolean;
  log: Logger;
  /** Polls running at once over all watchers (each opens a connection). Default 4. */
  maxConcurrentPolls?: number;
  /** Wait before the first poll of a watcher just set (ms). Default 1000. */
  firstPollDelayMs?: number;
  /** Replaces every watcher's `poll_interval_seconds` (tests; the protocol's minimum is 10 s). */
  pollIntervalMs?: number;
}

export const DEFAULT_MAX_CONCURRENT_POLLS = 4;
/** The protocol's limit on `watch.polled.error`. */
const MAX_ERROR_CHARS = 2000;
/**
 * A `watch.found` is sent before its files' JSON passes this: 1000 paths of up to 4096 characters
 * (and names, versions) can exceed the 4 MiB frame, which the control plane would refuse.
 */
const MAX_FOUND_BYTES = MAX_FRAME_BYTES / 4;
/** The protocol's limits on a FoundFile's strings (watch-protocol.ts); a version past them cannot be sent. */
const MAX_PATH_CHARS = 4096;
const MAX_NAME_CHARS = 1024;
const MAX_VERSION_CHARS = 512;

/** One watcher this agent polls: what the control plane last said about it, and its poller. */
interface Watcher {
  readonly id: string;
  readonly revision: number;
  /** The newest settings of this revision (the connection's credentials may be rotated in between). */
  assigned: AssignedWatcher;
  readonly watch: FolderWatch;
  timer: NodeJS.Timeout | null;
  /** When its last poll started (ms); null before the first. */
  lastStartedAt: number | null;
  poll: { controller: AbortController; done: Promise<void> } | null;
}

/**
 * Polls the watchers the control plane assigned to this agent (docs/agent.md "Watching a folder").
 * `apply` takes each `watch.set`, the whole set: watchers not in it are stopped and forgotten; one
 * with the same id and revision keeps its `FolderWatch` (its state) and takes the newest settings;
 * a new revision starts over with a new `FolderWatch`. Each watcher is polled shortly after it is
 * set, then every `poll_interval_seconds` from the start of its previous poll (at once, behind the
 * others waiting, when a poll took longer); never two polls of one watcher at once, and at most
 * `maxConcurrentPolls` over all of them, in the order they fell due. Each poll creates the
 * connector of the watcher's connection through the agent's connector source and closes it after.
 *
 * The new stable versions go out as `watch.found` through the session's report queue (numbered,
 * held until acknowledged, sent again after every reconnect), up to MAX_FOUND_PER_REPORT a message;
 * then `watch.polled` says how the poll went. While the session is down no poll starts (the
 * watchers' state is kept: the control plane sends the set again after the welcome). `stop` aborts
 * the polls running and ends the runner.
 */
export class WatchRunner {
  private readonly watchers = new Map<string, Watcher>();
  /** Watchers whose poll is due, waiting for a slot or for the session, in the order they fell due. */
  private readonly due = new Set<Watcher>();
  private running = 0;
  private stopped = false;
  private readonly maxPolls: number;

  constructor(private readonly o: WatchRunnerOptions) {
    this.maxPolls = Math.max(1, o.maxConcurrentPolls ?? DEFAULT_MAX_CONCURRENT_POLLS);
  }

  /** Watchers held (polled or waiting). */
  get size(): number {
    return this.watchers.size;
  }

  /**
   * Applies one `watch.set` (validated by the session's parseMessage). A watcher that cannot be
   * polled (a pattern FolderWatch refuses, a bad `report_since`) is answered with a `watch.polled`
   * whose `error` names the field, and is not held; the others are applied all the same.
   */
  apply(set: WatchSet): void {
    if (this.stopped) return;
    // A repeated id: the last one stands (the control plane never sends two).
    const wanted = new Map(set.watchers.map((w) => [w.id, w]));
    for (const watcher of [...this.watchers.values()]) {
      if (wanted.get(watcher.id)?.revision !== watcher.revision) this.forget(watcher);
    }
    for (const assigned of wanted.values()) {
      const held = this.watchers.get(assigned.id);
      if (held) this.update(held, assigned);
      else this.add(assigned);
    }
    this.startDue();
  }

  /** The session is open again: polls that fell due while it was down start now. */
  resume(): void {
    this.startDue();
  }

  /** Stops every watcher: aborts the polls running and waits for them; later sets are ignored. */
  async stop(): Promise<void> {
    this.stopped = true;
    const polls = [...this.watchers.values()].flatMap((w) => (w.poll ? [w.poll.done] : []));
    for (const watcher of [...this.watchers.values()]) this.forget(watcher);
    await Promise.all(polls);
  }

  private add(assigned: AssignedWatcher): void {
    let watch: FolderWatch;
    try {
      watch = new FolderWatch(assigned.spec, {
        ...(assigned.report_since !== undefined ? { report_since: new Date(assigned.report_since) } : {}),
        ...(assigned.report_undated !== undefined ? { report_undated: assigned.report_undated } : {}),
      });
    } catch (err) {
      if (!(err instanceof WatchSpecError)) throw err;
      this.o.log.warn({ watcher_id: assigned.id, revision: assigned.revision, field: err.field, error: err.message }, 'watcher refused: its settings cannot be used');
      this.sendPolled(assigned, Date.now(), { error: err.message });
      return;
    }
    const watcher: Watcher = { id: assigned.id, revision: assigned.revision, assigned, watch, timer: null, lastStartedAt: null, poll: null };
    this.watchers.set(watcher.id, watcher);
    this.o.log.info({ watcher_id: watcher.id, revision: watcher.revision, connection_id: assigned.connection.id, path: assigned.spec.path }, 'watching a folder');
    this.schedule(watcher, this.o.firstPollDelayMs ?? 1000);
  }

  /** Same id and revision: the state stays, the settings are the newest; a new interval counts from the last poll. */
  private update(watcher: Watcher, assigned: AssignedWatcher): void {
    const intervalChanged = assigned.poll_interval_seconds !== watcher.assigned.poll_interval_seconds;
    watcher.assigned = assigned;
    if (intervalChanged && watcher.timer && watcher.lastStartedAt !== null) {
      this.schedule(watcher, watcher.lastStartedAt + this.intervalMs(watcher) - Date.now());
    }
  }

  private forget(watcher: Watcher): void {
    if (this.watchers.get(watcher.id) === watcher) this.watchers.delete(watcher.id);
    if (watcher.timer) clearTimeout(watcher.timer);
    watcher.timer = null;
    this.due.delete(watcher);
    watcher.poll?.controller.abort(new Error(this.stopped ? 'agent shutting down' : 'watcher removed or changed'));
  }

  private current(watcher: Watcher): boolean {
    return !this.stopped && this.watchers.get(watcher.id) === watcher;
  }

  private intervalMs(watcher: Watcher): number {
    return this.o.pollIntervalMs ?? watcher.assigned.poll_interval_seconds * 1000;
  }

  /** Makes the watcher due in `delayMs`. */
  private schedule(watcher: Watcher, delayMs: number): void {
    if (watcher.timer) clearTimeout(watcher.timer);
    watcher.timer = setTimeout(() => {
      watcher.timer = null;
      if (!this.current(watcher)) return;
      this.due.add(watcher);
      this.startDue();
    }, Math.max(0, delayMs));
    // The session's socket keeps the process alive; a watcher's timer alone must not.
    watcher.timer.unref();
  }

  private startDue(): void {
    if (this.stopped || !this.o.connected()) return;
    for (const watcher of this.due) {
      if (this.running >= this.maxPolls) return;
      this.due.delete(watcher);
      if (this.current(watcher) && !watcher.poll) this.start(watcher);
    }
  }

  private start(watcher: Watcher): void {
    this.running++;
    const controller = new AbortController();
    const startedAt = Date.now();
    watcher.lastStartedAt = startedAt;
    const done = this.pollOnce(watcher, controller.signal, startedAt)
      .catch((err: unknown) => this.o.log.error({ err, watcher_id: watcher.id }, 'a watcher poll ended with an unexpected error'))
      .finally(() => {
        this.running--;
        watcher.poll = null;
        if (this.current(watcher)) this.schedule(watcher, startedAt + this.intervalMs(watcher) - Date.now());
        this.startDue();
      });
    watcher.poll = { controller, done };
  }

  /** One poll: connector, listing, `watch.found` batches, `watch.polled`. Never rejects but for a bug. */
  private async pollOnce(watcher: Watcher, signal: AbortSignal, startedAt: number): Promise<void> {
    const { id, revision, assigned } = watcher;
    const log = this.o.log.child({ watcher_id: id, revision });
    const batch = new FoundBatch((files) => {
      this.send('watch.found', { watcher_id: id, revision, files });
      log.info({ files: files.length }, 'new files found');
    });
    let connector: Connector | null = null;
    let summary: PollSummary | null = null;
    let failure: unknown = null;
    try {
      connector = await this.o.connectors.create(assigned.connection);
      signal.throwIfAborted();
      summary = await watcher.watch.poll(connector, {
        signal,
        report: (version) => {
          const file = foundFile(version);
          if (file) batch.add(file);
          else log.warn({ path: truncate(version.path, 300), path_chars: version.path.length, version_chars: version.version.length }, 'a new file cannot be reported: its path, name or version is longer than the protocol allows');
        },
      });
    } catch (err) {
      failure = err;
    } finally {
      // What a failed or aborted poll found was counted as reported by the FolderWatch: it goes out too.
      batch.flush();
      await connector?.close().catch((err: unknown) => log.warn({ err: reasonOf(err) }, 'closing a watcher connector failed'));
    }
    if (signal.aborted) {
      // Removed, replaced by a new revision, or the agent is stopping: nobody wants this poll's summary.
      log.debug('watcher poll aborted');
      return;
    }
    if (failure !== null) {
      const error = truncate(reasonOf(failure), MAX_ERROR_CHARS) || 'the poll failed';
      log.warn({ error, connection_id: assigned.connection.id }, 'watcher poll failed');
      this.sendPolled(assigned, startedAt, { error, reported: batch.sent, state_bytes: watcher.watch.stateBytes });
      return;
    }
    const s = summary!;
    log.debug({ ...s, duration_ms: Date.now() - startedAt }, 'watcher polled');
    this.sendPolled(assigned, startedAt, { listed: s.listed, matched: s.matched, reported: batch.sent, waiting: s.waiting, state_bytes: s.state_bytes });
  }

  private sendPolled(assigned: AssignedWatcher, startedAt: number, result: Partial<Omit<Polled, 'watcher_id' | 'revision' | 'started_at' | 'duration_ms'>>): void {
    this.send('watch.polled', {
      watcher_id: assigned.id, revision: assigned.revision, started_at: new Date(startedAt).toISOString(),
      duration_ms: Math.max(0, Date.now() - startedAt), listed: 0, matched: 0, reported: 0, waiting: 0, state_bytes: 0, ...result,
    });
  }

  private send<T extends keyof typeof AgentToServer & string>(type: T, payload: PayloadOf<typeof AgentToServer, T>): void {
    this.o.send(frame(AgentToServer, type, payload) as AgentMessage);
  }
}

/**
 * The versions of one poll not sent yet: sent (into the report queue) when MAX_FOUND_PER_REPORT
 * are waiting or their JSON reaches MAX_FOUND_BYTES, and at the end of the poll however it ends.
 * A version here is as safe as one in the queue: both live in this process until it is sent.
 */
class FoundBatch {
  private files: FoundFile[] = [];
  private bytes = 0;
  /** Versions handed to `out` so far. */
  sent = 0;

  constructor(private readonly out: (files: FoundFile[]) => void) {}

  add(file: FoundFile): void {
    const bytes = Buffer.byteLength(JSON.stringify(file));
    if (this.bytes + bytes > MAX_FOUND_BYTES) this.flush();
    this.files.push(file);
    this.bytes += bytes;
    if (this.files.length >= MAX_FOUND_PER_REPORT) this.flush();
  }

  flush(): void {
    if (this.files.length === 0) return;
    const files = this.files;
    this.files = [];
    this.bytes = 0;
    this.sent += files.length;
    this.out(files);
  }
}

/** The protocol's FoundFile for a version, or null when one of its strings is too long to be sent. */
function foundFile(v: FileVersion): FoundFile | null {
  if (v.path.length === 0 || v.path.length > MAX_PATH_CHARS || v.name.length > MAX_NAME_CHARS || v.version.length > MAX_VERSION_CHARS) return null;
  return { path: v.path, name: v.name, size: v.size, ...(v.modified_at !== undefined ? { modified_at: v.modified_at } : {}), version: v.version };
}
