import { Type, type Static } from '@sinclair/typebox';
import { Id, Name, PageQuery, StringEnum, Timestamp } from './common.js';
import { JobOptions } from '../protocol/agent-protocol.js';

/** Transfer job states (api.md "States and transitions"). */
export const TRANSFER_STATUSES = ['queued', 'in-progress', 'completed', 'failed', 'cancelled'] as const;
export type TransferStatus = (typeof TRANSFER_STATUSES)[number];
/** States a job never leaves except by retry (failed, cancelled) or delete. */
export const FINISHED_TRANSFER_STATUSES = ['completed', 'failed', 'cancelled'] as const satisfies readonly TransferStatus[];

/** Defaults of `options` (decisions.md "Transfers"). */
export const DEFAULT_TRANSFER_OPTIONS: JobOptions = { overwrite: 'if_changed', verify: 'checksum', concurrency: 8 };

/** Longest `sourcePath` / `destinationPath` (the agent protocol's limit). */
export const MAX_TRANSFER_PATH_LENGTH = 4096;

/** How an attempt runs: on one agent serving both connections, or relayed between two agents. */
export const TRANSFER_MODES = ['direct', 'relay'] as const;
export type TransferMode = (typeof TRANSFER_MODES)[number];

/** Why an attempt ended without ending the transfer: it was taken over by a new attempt. */
export const Interruption = Type.Object({
  /** The attempt that ended. */
  attempt: Type.Integer({ minimum: 1 }),
  /** The agent that ran it (a relay's destination side), if any. */
  agent_id: Type.Union([Id, Type.Null()]),
  reason: Type.String(),
  at: Timestamp,
});
export type Interruption = Static<typeof Interruption>;

/** A transfer job (api.md "Transfer job", decisions.md "Transfers"). */
export const Transfer = Type.Object({
  id: Id,
  name: Type.String(),
  sourceConnectionId: Id,
  sourcePath: Type.String(),
  destinationConnectionId: Id,
  destinationPath: Type.String(),
  /** Every option with its default filled in. */
  options: JobOptions,
  status: StringEnum(TRANSFER_STATUSES),
  /** Files found in the source so far (final once the run ends). */
  files_total: Type.Integer(),
  /** Files copied and verified; persisted at least every 5 files. */
  files_transferred: Type.Integer(),
  /** Files left alone because the destination already had them (overwrite policy, or a retry resuming). */
  files_skipped: Type.Integer(),
  files_failed: Type.Integer(),
  /** Files deleted by the run (`sync`: at the destination; `move`: at the source). */
  files_deleted: Type.Integer(),
  bytes_transferred: Type.Integer(),
  started_at: Type.Union([Timestamp, Type.Null()]),
  completed_at: Type.Union([Timestamp, Type.Null()]),
  /** Why the job failed; null otherwise. */
  error: Type.Union([Type.String(), Type.Null()]),
  /** Set when the run stopped because its `window` or `max_duration` ended (status `failed`): a retry or the next scheduled run resumes from the verified files. */
  cutoff: Type.Union([StringEnum(['window', 'max_duration'] as const), Type.Null()]),
  /**
   * The agent running (or that ran) the current attempt, null while it waits: the one agent of a
   * direct run, the destination side of a relayed one (it writes, verifies and reports).
   */
  agent_id: Type.Union([Id, Type.Null()]),
  /** How the current attempt runs: on one agent, or relayed from `source_agent_id` to `agent_id`; null while it waits. */
  mode: Type.Union([StringEnum(TRANSFER_MODES), Type.Null()]),
  /** A relayed attempt's source side (it lists and reads the source); null otherwise. */
  source_agent_id: Type.Union([Id, Type.Null()]),
  /** Run number: 1, and one more per retry and per takeover. */
  attempt: Type.Integer({ minimum: 1 }),
  /** The same number as `attempt`: how many runs the transfer has had, the current one included. */
  attempts: Type.Integer({ minimum: 1 }),
  /**
   * When `execute` made the transfer wait for an agent; kept by takeovers (a taken-over run keeps
   * its place in the queue); null for a transfer never executed (or retried and not executed again).
   */
  queued_at: Type.Union([Timestamp, Type.Null()]),
  /** 1-based place among the account's transfers waiting for an agent (oldest `queued_at` first); null unless waiting. */
  queue_position: Type.Union([Type.Integer({ minimum: 1 }), Type.Null()]),
  /** Automatic takeovers since the last execute or retry (an agent gone silent, an interrupted run). */
  takeovers: Type.Integer({ minimum: 0 }),
  /** Why the last taken-over attempt ended; null when none was. */
  last_interruption: Type.Union([Interruption, Type.Null()]),
  created_at: Timestamp,
  updated_at: Timestamp,
});
export type Transfer = Static<typeof Transfer>;

const ConnectionRef = Type.String({ minLength: 1, maxLength: 64 });
const TransferPath = Type.String({ minLength: 1, maxLength: MAX_TRANSFER_PATH_LENGTH });

/** Options of a create: the job's options, each optional (absent ones take their defaults), nothing else. */
export const TransferOptionsInput = Type.Partial(JobOptions, { additionalProperties: false });
export type TransferOptionsInput = Static<typeof TransferOptionsInput>;

/**
 * POST /transfers: every api.md field is required. Paths start with `/` and have no `..`
 * segment, NUL/control character or backslash; `sourcePath` is a file or a directory,
 * `destinationPath` a directory.
 */
export const CreateTransferRequest = Type.Object(
  {
    name: Name,
    sourceConnectionId: ConnectionRef,
    sourcePath: TransferPath,
    destinationConnectionId: ConnectionRef,
    destinationPath: TransferPath,
    options: Type.Optional(TransferOptionsInput),
  },
  { additionalProperties: false },
);
export type CreateTransferRequest = Static<typeof CreateTransferRequest>;

export const ListTransfersQuery = Type.Composite(
  [PageQuery, Type.Object({ status: Type.Optional(StringEnum(TRANSFER_STATUSES)) })],
  { additionalProperties: false },
);
export type ListTransfersQuery = Static<typeof ListTransfersQuery>;

/** `?wait=false`: answer 202 with the job at once instead of waiting for its end. */
export const ExecuteTransferQuery = Type.Object(
  { wait: Type.Optional(Type.Boolean({ default: true })) },
  { additionalProperties: false },
);
export type ExecuteTransferQuery = Static<typeof ExecuteTransferQuery>;

/**
 * The bare answer of a blocking execute (api.md: not wrapped in `data`). `status`,
 * `files_total` and `error` are present only when `success` is false.
 */
export const ExecuteTransferResult = Type.Object({
  success: Type.Boolean(),
  files_transferred: Type.Integer(),
  bytes_transferred: Type.Integer(),
  /** Files the run deleted (`sync`, `move`); present when it deleted any. */
  files_deleted: Type.Optional(Type.Integer()),
  status: Type.Optional(StringEnum(TRANSFER_STATUSES)),
  files_total: Type.Optional(Type.Integer()),
  error: Type.Optional(Type.Union([Type.String(), Type.Null()])),
});
export type ExecuteTransferResult = Static<typeof ExecuteTransferResult>;

export const TRANSFER_FILE_STATUSES = ['copied', 'skipped', 'failed', 'deleted'] as const;

/** The outcome of one file in one run of a job (from the agent's `job.progress`). */
export const TransferFile = Type.Object({
  /** Relative to the job's source path. */
  path: Type.String(),
  attempt: Type.Integer({ minimum: 1 }),
  status: StringEnum(TRANSFER_FILE_STATUSES),
  size: Type.Integer(),
  sha256: Type.Union([Type.String(), Type.Null()]),
  verified_by: Type.Union([Type.String(), Type.Null()]),
  error: Type.Union([Type.String(), Type.Null()]),
  /** Why the file was skipped or not acted on; null otherwise. */
  reason: Type.Union([Type.String(), Type.Null()]),
  created_at: Timestamp,
});
export type TransferFile = Static<typeof TransferFile>;

export const ListTransferFilesQuery = Type.Composite(
  [PageQuery, Type.Object({
    status: Type.Optional(StringEnum(TRANSFER_FILE_STATUSES)),
    attempt: Type.Optional(Type.Integer({ minimum: 1 })),
  })],
  { additionalProperties: false },
);
export type ListTransferFilesQuery = Static<typeof ListTransferFilesQuery>;
