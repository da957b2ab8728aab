import { Args, Command, Errors, Flags } from '@oclif/core';
import {
  ApiError, ExitCode, exitCodeOf, FINISHED_TRANSFER_STATUSES, OVERWRITE_POLICIES, TRANSFER_FILE_STATUSES, TRANSFER_STATUSES, VERIFY_MODES,
  type CreateTransferRequest, type OverwritePolicy, type Transfer, type TransferFile, type TransferOptionsInput, type TransferStatus, type VerifyMode,
  type XferClient,
} from '@xfer/shared';
import { BaseCommand } from '../base-command.js';
import { Messages } from '../messages.js';
import { errorLine, record, type Column } from '../output.js';
import { SYNC_OPTION_FLAGS, syncOptionFlags, syncOptions, type SyncOptionFlags } from './sync-options.js';
import { createProgress, formatBytes, progressMode, writeLine, type ProgressDisplay, type ProgressInput } from '../progress/index.js';

export const transferColumns: Column<Transfer>[] = [
  { header: 'id', get: (t) => t.id },
  { header: 'name', get: (t) => t.name },
  { header: 'status', get: (t) => t.status },
  { header: 'files', get: (t) => `${t.files_transferred + t.files_skipped}/${t.files_total}` },
  { header: 'bytes', get: (t) => formatBytes(t.bytes_transferred) },
  // Files a sync deleted at the destination, a move at the source.
  { header: 'deleted', get: (t) => t.files_deleted ?? 0 },
  { header: 'attempt', get: (t) => t.attempt },
  { header: 'created', get: (t) => t.created_at },
];

export const transferFileColumns: Column<TransferFile>[] = [
  { header: 'path', get: (f) => f.path },
  { header: 'status', get: (f) => f.status },
  { header: 'size', get: (f) => formatBytes(f.size) },
  { header: 'attempt', get: (f) => f.attempt },
  { header: 'error', get: (f) => f.error },
  { header: 'reason', get: (f) => f.reason },
];

export const transferIdArg = { id: Args.string({ description: 'Transfer id', required: true }) };

export const transferStatusFlag = Flags.string({ description: 'Only transfers in this state', options: [...TRANSFER_STATUSES] });
export const transferFileStatusFlag = Flags.string({ description: 'Only files with this outcome', options: [...TRANSFER_FILE_STATUSES] });

/**
 * How a transfer copies: the flags of every command that makes transfers (transfers, schedules,
 * watchers), with the sync, filter and limit flags (sync-options.ts); absent, the server's defaults apply.
 */
export const transferOptionFlags = {
  overwrite: Flags.string({ description: 'When a file the destination already has is replaced (server default: if_changed)', options: [...OVERWRITE_POLICIES] }),
  verify: Flags.string({ description: 'How each copy is checked (server default: checksum)', options: [...VERIFY_MODES] }),
  concurrency: Flags.integer({ description: 'Files copied at once, 1-64 (server default: 8)', min: 1, max: 64 }),
  ...syncOptionFlags,
};
export const TRANSFER_OPTION_FLAGS = ['overwrite', 'verify', 'concurrency', ...SYNC_OPTION_FLAGS] as const;
export type TransferOptionFlags = { overwrite?: string; verify?: string; concurrency?: number } & SyncOptionFlags;

/**
 * A request's `options`: the flags given over `current` (an update changes only what it names, but
 * the API replaces a stored transfer whole); undefined when there are none, so the server's defaults
 * apply. `argv` gives the order of the filter rules (sync-options.ts `filterRules`).
 */
export function transferOptions(f: TransferOptionFlags, current?: TransferOptionsInput, argv: readonly string[] = process.argv): TransferOptionsInput | undefined {
  const options = {
    ...current,
    ...(f.overwrite !== undefined && { overwrite: f.overwrite as OverwritePolicy }),
    ...(f.verify !== undefined && { verify: f.verify as VerifyMode }),
    ...(f.concurrency !== undefined && { concurrency: f.concurrency }),
    ...syncOptions(f, argv),
  };
  return Object.keys(options).length > 0 ? options : undefined;
}

/** What a job copies and how: the flags of `create` and `run`. */
export const transferSpecFlags = {
  name: Flags.string({ description: 'Name of the job (default: "<source>:<source-path> -> <dest>:<dest-path>")' }),
  source: Flags.string({ description: 'Source connection: its id or its name', required: true }),
  'source-path': Flags.string({ description: 'File or directory on the source, starting with /', required: true }),
  dest: Flags.string({ description: 'Destination connection: its id or its name', required: true }),
  'dest-path': Flags.string({ description: 'Directory on the destination, starting with /', required: true }),
  ...transferOptionFlags,
};

type SpecFlags = TransferOptionFlags & { name?: string; source: string; 'source-path': string; dest: string; 'dest-path': string };

const OBJECT_ID = /^[0-9a-f]{24}$/i;

/**
 * The id of a connection given by id or by name. The API takes ids only; names are unique per
 * account, so the CLI looks a name up (GET /connections) to spare people copying ids around.
 */
export async function connectionId(client: XferClient, ref: string): Promise<string> {
  if (OBJECT_ID.test(ref)) return ref;
  for await (const c of client.connections.all({ limit: 1000 })) if (c.name === ref) return c.id;
  throw new Errors.CLIError(Messages.connectionNotFound(ref), { exit: ExitCode.notFound });
}

/** For an update: the id of the connection a flag names, else the stored one (`''` when there is none: the server names the missing field). */
export async function connectionIdOr(client: XferClient, ref: string | undefined, current: string | undefined): Promise<string> {
  return ref !== undefined ? connectionId(client, ref) : current ?? '';
}

/** The POST /transfers body from `transferSpecFlags`; options left out take the server's defaults. */
export async function createRequest(client: XferClient, f: SpecFlags): Promise<CreateTransferRequest> {
  const [sourceConnectionId, destinationConnectionId] = await Promise.all([connectionId(client, f.source), connectionId(client, f.dest)]);
  const options = transferOptions(f);
  return {
    name: f.name ?? `${f.source}:${f['source-path']} -> ${f.dest}:${f['dest-path']}`.slice(0, 200),
    sourceConnectionId, sourcePath: f['source-path'], destinationConnectionId, destinationPath: f['dest-path'],
    ...(options && { options }),
  };
}

export const isFinished = (status: TransferStatus): boolean => (FINISHED_TRANSFER_STATUSES as readonly string[]).includes(status);

/** What a progress display shows of a transfer (also a workflow run's transfer step). */
export function progressOf(t: Transfer): ProgressInput {
  return {
    label: t.name, state: t.status, bytes: t.bytes_transferred,
    // Skipped files are done too: a retry that resumes should not look stuck at its start.
    files: t.files_transferred + t.files_skipped,
    // 0 until the agent has walked some of the source: no total rather than a false 100%.
    filesTotal: t.files_total > 0 ? t.files_total : undefined,
  };
}

/** First poll soon (short jobs end fast), then slower up to once a second. */
const POLL_MIN_MS = 200;
const POLL_MAX_MS = 1000;

export interface FollowOptions {
  /** run/execute: the first Ctrl-C cancels the job on the server. watch: Ctrl-C only stops watching. */
  cancelOnInterrupt: boolean;
  quiet: boolean;
  json: boolean;
}

/**
 * Polls a job (GET /transfers/:id) with a progress display on stderr until it finishes, and
 * returns its last state. Ctrl-C: see `FollowOptions.cancelOnInterrupt`; a second one (or the
 * first, when only watching) exits 130 at once, whatever request is in flight.
 */
export async function followTransfer(client: XferClient, start: Transfer, o: FollowOptions): Promise<Transfer> {
  const id = start.id;
  const mode = progressMode(o);
  const progress: ProgressDisplay = await createProgress(mode);
  let current = start;
  let done = false;
  let interrupts = 0;
  let wake = () => {};
  const note = (line: string) => {
    if (!done) writeLine(line);
  };
  const onSigint = () => {
    interrupts++;
    if (!o.cancelOnInterrupt || interrupts > 1) {
      progress.stop();
      const message = o.cancelOnInterrupt ? Messages.stoppedWaiting(id) : Messages.stoppedWatching(id);
      process.stderr.write(errorLine(message, o.json));
      process.exit(130);
    }
    note(Messages.cancelling(id));
    client.transfers.cancel(id).then(
      () => wake(),
      // 409: it ended on its own meanwhile; the next poll shows how.
      (err: unknown) => { if (!(err instanceof ApiError && err.kind === 'conflict')) note(Messages.cancelFailed(id, (err as Error).message)); wake(); },
    );
  };
  process.on('SIGINT', onSigint);
  try {
    // Told like progress is (not to scripts): a queued job may wait for a long time.
    if (current.status === 'queued' && mode !== 'none') note(current.queued_at ? Messages.waiting(id, current.queue_position) : Messages.queued(id));
    let delay = POLL_MIN_MS;
    for (;;) {
      progress.update(progressOf(current));
      if (isFinished(current.status)) return current;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, delay);
        wake = () => { clearTimeout(timer); resolve(); };
      });
      delay = Math.min(POLL_MAX_MS, delay * 1.5);
      try {
        current = await client.transfers.get(id);
      } catch (err) {
        // The client already retried what can be retried; the job itself is not affected.
        if (err instanceof ApiError) throw new Errors.CLIError(Messages.pollFailed(id, err.message), { exit: exitCodeOf(err) });
        throw err;
      }
    }
  } finally {
    done = true;
    process.off('SIGINT', onSigint);
    progress.stop();
  }
}

/**
 * run, execute, watch and retry --run: follow a job to its end, then print it (stdout, `--json`
 * included) and exit 0 when it completed, 7 with the job's error as the one stderr line otherwise.
 */
export abstract class FollowCommand<T extends typeof Command> extends BaseCommand<T> {
  protected async followToEnd(client: XferClient, start: Transfer, cancelOnInterrupt: boolean): Promise<Transfer> {
    const flags = this.flags as unknown as { quiet?: boolean };
    const final = await followTransfer(client, start, { cancelOnInterrupt, quiet: flags.quiet ?? false, json: this.jsonEnabled() });
    if (final.status === 'completed') {
      this.print(record(final));
      return final;
    }
    // oclif prints `run()`'s result only on success; a script still gets the final job on stdout.
    if (this.jsonEnabled()) this.logJson(final);
    else this.log(record(final));
    throw new Errors.CLIError(Messages.transferEnded(final.id, final.status, final.error), { exit: ExitCode.transferFailed });
  }

  /** --no-wait: the job as started, and how to follow it. */
  protected started(transfer: Transfer): Transfer {
    this.print(record(transfer));
    this.note(Messages.transferStarted(transfer.id));
    return transfer;
  }
}
