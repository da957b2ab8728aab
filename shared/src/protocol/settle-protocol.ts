import { Type, type Static } from '@sinclair/typebox';
import { ConnectionSettings } from '../schemas/connections.js';
import { StringEnum } from '../schemas/common.js';

/**
 * Settling a transfer's source files over the agent protocol: the `move_source` and
 * `delete_source` steps of a workflow (scope-areas.md "Workflows"; docs/automation.md
 * "Workflows"; the agent side is agent/src/session/source-settle.ts). The control plane sends the
 * files of one transfer whose copies were verified, a batch at a time, to an agent serving the
 * source connection (`source.settle`); the agent moves or deletes each one and answers with an
 * outcome per file (`source.settle.result`). A request is safe to repeat: a file already moved or
 * deleted is reported so, never as a failure.
 */

/** What a settle request does to each file: move it under `to`, or delete it. */
export const SETTLE_ACTIONS = ['move', 'delete'] as const;
export type SettleAction = (typeof SETTLE_ACTIONS)[number];

/**
 * What became of one file:
 * - `moved` / `deleted`: done (also when an earlier request had done it: for a move, the file is
 *   gone from the source and at its target with the verified size);
 * - `gone`: not at the source any more, and (for a move) not at its target either: nothing to do;
 * - `changed`: its size at the source is not the size that was copied and verified (a new version
 *   arrived): left where it is;
 * - `failed`: the store refused or the path was refused (`error` says why); left where it is, or
 *   for a move on a store without rename, possibly copied to its target and still at the source.
 */
export const SETTLE_OUTCOMES = ['moved', 'deleted', 'gone', 'changed', 'failed'] as const;
export type SettleOutcome = (typeof SETTLE_OUTCOMES)[number];

/** Files one `source.settle` carries at most (the control plane sends a transfer's files in batches). */
export const MAX_SETTLE_FILES = 100;

/** A verified file of the transfer: its path as the transfer's file results name it, and the size that was copied. */
export const SettleFile = Type.Object({
  /**
   * Relative to the transfer's source path when that is a folder; the file's base name when the
   * source path is one file. `/`-separated, no empty, `.` or `..` segment (the agent refuses those).
   */
  path: Type.String({ minLength: 1, maxLength: 4096 }),
  size: Type.Integer({ minimum: 0 }),
});
export type SettleFile = Static<typeof SettleFile>;

export const SettleResult = Type.Object({
  path: Type.String({ maxLength: 4096 }),
  outcome: StringEnum(SETTLE_OUTCOMES),
  error: Type.Optional(Type.String({ maxLength: 2000 })),
});
export type SettleResult = Static<typeof SettleResult>;

export const SettleServerToAgent = {
  /**
   * Move or delete verified source files of a transfer. `source_path` is the transfer's (rendered)
   * source path on `connection`; a move puts each file at `to` + `/` + its `path` (folders
   * created as needed), replacing what is there. Sent only to agents whose hello set `settle`.
   */
  'source.settle': Type.Object({
    request_id: Type.String({ maxLength: 64 }),
    connection: ConnectionSettings,
    action: StringEnum(SETTLE_ACTIONS),
    source_path: Type.String({ maxLength: 4096 }),
    to: Type.Optional(Type.String({ minLength: 1, maxLength: 4096 })),
    files: Type.Array(SettleFile, { minItems: 1, maxItems: MAX_SETTLE_FILES }),
  }),
};

export const SettleAgentToServer = {
  /** Reply to `source.settle`: one result per file sent, in any order. */
  'source.settle.result': Type.Object({
    request_id: Type.String({ maxLength: 64 }),
    results: Type.Array(SettleResult, { maxItems: MAX_SETTLE_FILES }),
    /** Set when the request as a whole could not be carried out (the connection could not be opened): `results` is then empty. */
    error: Type.Optional(Type.String({ maxLength: 2000 })),
  }),
};
