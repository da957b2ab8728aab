import { Type, type Static, type TSchema } from '@sinclair/typebox';
import { isUtf8 } from 'node:buffer';
import { Value } from '@sinclair/typebox/value';
import { ConnectionSettings, ConnectionTypeName } from '../schemas/connections.js';
import { AgentLabel, StringEnum } from '../schemas/common.js';
import { ProtocolError } from './protocol-error.js';
import { RelayAgentToServer, RelayForwarded, RelayServerToAgent } from './relay-protocol.js';
import { WatchAgentToServer, WatchServerToAgent } from './watch-protocol.js';
import { SettleAgentToServer, SettleServerToAgent } from './settle-protocol.js';
import { PlanAgentToServer, PlanServerToAgent } from './plan-protocol.js';
import { JobOptions } from './job-options.js';

export { ProtocolError };

/**
 * The agent protocol (ARCHITECTURE.md "Agent protocol"): JSON text frames over the WebSocket the
 * agent dials to `/api/v1/agents/connect` with `Authorization: Bearer agt_…`. Every frame is
 * `{v: 1, type, id, payload}` and is validated on arrival by both sides with `parseMessage`;
 * a frame that fails validation closes the socket with `CloseCodes.protocolError` and changes
 * nothing. `id` is unique per sender; a reply carries the id of the request in `payload.request_id`.
 *
 * Liveness uses WebSocket ping/pong control frames (the control plane pings every
 * `heartbeat_ms`; each side drops a peer silent for `3 × heartbeat_ms`); the `ping`/`pong`
 * messages below are the application-level round trip of `POST /agents/:id/test`.
 */
export const PROTOCOL_VERSION = 1 as const;

/** Close codes (4000–4999 are for applications, RFC 6455 §7.4.2). */
export const CloseCodes = {
  /** Normal end (agent shutting down after draining, server shutting down). */
  normal: 1000,
  /** The server is going away; reconnect (possibly to another instance). */
  goingAway: 1001,
  /** A frame failed validation or broke the session order; the sender has a bug. Reconnect after backoff. */
  protocolError: 4400,
  /** Token unknown, or the agent was revoked: never reconnect with this token. */
  revoked: 4401,
  /** Another session of the same agent connected; this one is stale. Do not reconnect. */
  replaced: 4409,
  /** The agent's protocol version is not supported by this control plane. */
  unsupportedVersion: 4426,
} as const;
export type CloseCode = (typeof CloseCodes)[keyof typeof CloseCodes];

/** Codes after which the agent must not reconnect by itself. */
export const TERMINAL_CLOSE_CODES: readonly number[] = [CloseCodes.revoked, CloseCodes.replaced, CloseCodes.unsupportedVersion];

export * from './job-options.js';

/** Outcome of one file, reported in `job.progress` and persisted per job. */
export const FileResult = Type.Object({
  /** Path relative to the job's source path ('' when the source is a single file: its name is used). */
  path: Type.String(),
  /** `deleted`: removed from the destination (`sync`) or from the source once copied (`move`: the file is reported `copied`, then `deleted`). */
  status: StringEnum(['copied', 'skipped', 'failed', 'deleted'] as const),
  /** Why a file was skipped or not acted on (`same size and mtime`, `changed since plan`, …). */
  reason: Type.Optional(Type.String({ maxLength: 200 })),
  size: Type.Integer({ minimum: 0 }),
  /** Hex SHA-256 of the bytes read from the source (absent for skipped files, but for one an earlier attempt verified: the SHA-256 it recorded). */
  sha256: Type.Optional(Type.String({ pattern: '^[0-9a-f]{64}$' })),
  /** What the destination was verified with (`attempt <n>` for a file skipped because that earlier attempt verified it): `sha256`, `md5`, `etag` (the store's checksum), `md5-parts` (a multipart upload the store confirmed part by part), `server-copy-etag` (copied by the store itself, its ETag the source's), `server-copy-md5` (copied by the store itself, checked against the source's Content-MD5), `server-copy-reread` (copied by an sftp server itself, copy-data: source and copy read back and their SHA-256 compared), `server-copy-size` (copied by an sftp server itself: its size checked, the source unchanged), `reread`, `size`. */
  verified_by: Type.Optional(Type.String({ maxLength: 32 })),
  error: Type.Optional(Type.String({ maxLength: 2000 })),
});
export type FileResult = Static<typeof FileResult>;

/** Progress counters, always cumulative for the current run. */
const Counters = {
  /** Files found so far in the source; final once listing ended (`listing_done`). */
  files_total: Type.Integer({ minimum: 0 }),
  files_transferred: Type.Integer({ minimum: 0 }),
  files_skipped: Type.Integer({ minimum: 0 }),
  files_failed: Type.Integer({ minimum: 0 }),
  bytes_transferred: Type.Integer({ minimum: 0 }),
  /** Files deleted (`sync`: at the destination; `move`: at the source). Absent from agents before issue 25. */
  files_deleted: Type.Optional(Type.Integer({ minimum: 0 })),
};

const JobRef = { job_id: Type.String({ minLength: 1, maxLength: 64 }) };

/**
 * Sequence number of a report the agent keeps until the control plane acknowledges it (`ack`),
 * and sends again after every reconnect until then. Optional, so agents and control planes of
 * before acknowledgements still talk (docs/architecture.md "Agents and jobs").
 */
const Seq = { seq: Type.Optional(Type.Integer({ minimum: 1 })) };

// ---------------------------------------------------------------------------------------------
// Resume (issue 14): the stored per-file results of earlier attempts, asked for in batches.
// ---------------------------------------------------------------------------------------------

/** Paths one `job.verified.query` may name. */
export const MAX_VERIFIED_QUERY_PATHS = 1000;
/** UTF-8 bytes of all the paths of one query together (the control plane closes the session past it): the reply stays far below MAX_FRAME_BYTES. */
export const MAX_VERIFIED_QUERY_BYTES = 1024 * 1024;

const ResumeAgentToServer = {
  /**
   * Which of these files (paths relative to the job's source path, as in `FileResult`) an earlier
   * attempt of the job recorded `copied`. Answered with `job.verified` carrying the same
   * `request_id`, only for a job this session runs now (its current attempt) and only from the
   * agent's own account's results; for any other job the answer is empty. Sent only to a control
   * plane whose welcome set `verified_lookup`.
   */
  'job.verified.query': Type.Object({
    ...JobRef,
    request_id: Type.String({ minLength: 1, maxLength: 64 }),
    paths: Type.Array(Type.String({ maxLength: 4096 }), { maxItems: MAX_VERIFIED_QUERY_PATHS }),
  }),
} as const;

/** One file an earlier attempt copied and verified: what it wrote (size, SHA-256 of the bytes read) and which attempt. */
export const VerifiedFile = Type.Object({
  path: Type.String({ maxLength: 4096 }),
  size: Type.Integer({ minimum: 0 }),
  sha256: Type.Optional(Type.String({ pattern: '^[0-9a-f]{64}$' })),
  attempt: Type.Integer({ minimum: 1 }),
});
export type VerifiedFile = Static<typeof VerifiedFile>;

const ResumeServerToAgent = {
  /** Answer to `job.verified.query`: of its paths, those recorded `copied` by an earlier attempt (the latest such record each); the others are absent. */
  'job.verified': Type.Object({
    request_id: Type.String({ maxLength: 64 }),
    files: Type.Array(VerifiedFile, { maxItems: MAX_VERIFIED_QUERY_PATHS }),
  }),
} as const;

/** Every message type and its payload schema, per direction. */
export const AgentToServer = {
  /** First frame of a session. `running_jobs`: jobs still running from before a reconnect. */
  hello: Type.Object({
    version: Type.String({ maxLength: 64 }),
    hostname: Type.String({ maxLength: 255 }),
    connector_types: Type.Array(ConnectionTypeName, { maxItems: 32 }),
    running_jobs: Type.Array(Type.String({ maxLength: 64 }), { maxItems: 10_000 }),
    max_jobs: Type.Integer({ minimum: 1, maximum: 1000 }),
    /** The agent numbers its job reports (`seq`) and wants them acknowledged (`ack`). */
    acks: Type.Optional(Type.Boolean()),
    /**
     * Jobs not running any more whose reports the agent still holds (they follow the welcome):
     * the control plane waits for those reports instead of settling the jobs as lost.
     */
    held_jobs: Type.Optional(Type.Array(Type.String({ maxLength: 64 }), { maxItems: 10_000 })),
    /** Pools the agent's operator put it in (`--label`, repeatable): joined to the labels the account gave it. */
    labels: Type.Optional(Type.Array(AgentLabel, { maxItems: 32 })),
    /** The agent can play either side of a relay (relay-protocol.ts): binary frames, `relay.*` messages. */
    relay: Type.Optional(Type.Boolean()),
    /** The agent polls watchers (watch-protocol.ts): `watch.set` may be sent to it. */
    watch: Type.Optional(Type.Boolean()),
    /** The agent moves and deletes verified source files (settle-protocol.ts): `source.settle` may be sent to it. */
    settle: Type.Optional(Type.Boolean()),
    /** The agent runs the issue-25 options (modes, compare, filters, limits, windows) and plans: jobs using them are sent only to agents that set this. */
    sync: Type.Optional(Type.Boolean()),
  }),
  /** The job was received and started. */
  'job.accepted': Type.Object({ ...JobRef }),
  /** Sent at least every 5 finished files and every few seconds while bytes move. */
  'job.progress': Type.Object({
    ...JobRef,
    ...Seq,
    ...Counters,
    listing_done: Type.Boolean(),
    /** Files finished since the previous progress message. */
    files: Type.Array(FileResult, { maxItems: 1000 }),
  }),
  'job.completed': Type.Object({ ...JobRef, ...Seq, ...Counters }),
  /** `error` names the failing files (first few) or the job-level cause. */
  'job.failed': Type.Object({
    ...JobRef, ...Seq, ...Counters, error: Type.String({ maxLength: 4000 }),
    /**
     * The run stopped for a reason that is not the job's (the agent is shutting down, a relay lost
     * its other side or its path through the control plane): the control plane lets another run
     * take over and resume, as for an agent gone silent, instead of failing the job.
     */
    interrupted: Type.Optional(Type.Boolean()),
    /** The run stopped because its `window` or `max_duration` ended (options.cutoff): the next run resumes from the verified files. */
    cutoff: Type.Optional(StringEnum(['window', 'max_duration'] as const)),
  }),
  /** Acknowledges `job.cancel` once every stream is aborted and partial files are removed. */
  'job.cancelled': Type.Object({ ...JobRef, ...Seq, ...Counters }),
  /** Reply to `connection.test`. */
  'connection.test.result': Type.Object({
    request_id: Type.String({ maxLength: 64 }),
    success: Type.Boolean(),
    message: Type.String({ maxLength: 2000 }),
    latency_ms: Type.Number({ minimum: 0 }),
  }),
  /** Reply to `ping`. */
  pong: Type.Object({ request_id: Type.String({ maxLength: 64 }) }),
  /**
   * Credentials a service replaced while the agent used them (a OneDrive refresh token rotated
   * by the token endpoint), for the control plane to store sealed in the connection. Accepted
   * only for the agent's own account's connections and for the fields a type rotates;
   * `previous_sha256` is the SHA-256 (hex) of each field's value it replaces, so a value someone
   * stored meanwhile is never overwritten.
   */
  'connection.credentials': Type.Object({
    connection_id: Type.String({ pattern: '^[0-9a-fA-F]{24}$' }),
    credentials: Type.Record(Type.String({ maxLength: 64 }), Type.String({ minLength: 1, maxLength: 16_384 }), { minProperties: 1, maxProperties: 4 }),
    previous_sha256: Type.Record(Type.String({ maxLength: 64 }), Type.String({ pattern: '^[0-9a-f]{64}$' }), { maxProperties: 4 }),
  }),
  ...ResumeAgentToServer,
  ...WatchAgentToServer,
  ...SettleAgentToServer,
  ...PlanAgentToServer,
  ...RelayForwarded,
  ...RelayAgentToServer,
} as const;

export const ServerToAgent = {
  /** Answer to `hello`: the session is open. */
  welcome: Type.Object({
    agent_id: Type.String(),
    heartbeat_ms: Type.Integer({ minimum: 100 }),
    /** A job whose agent is silent this long is taken over by the control plane (another run resumes it elsewhere). */
    lease_ms: Type.Integer({ minimum: 100 }),
    /** Of `hello.running_jobs`, the ones the control plane no longer wants (cancelled, failed, deleted): abort them. */
    abort_jobs: Type.Array(Type.String({ maxLength: 64 })),
    /** The control plane acknowledges numbered reports (`ack`); set only when `hello.acks` was. */
    acks: Type.Optional(Type.Boolean()),
    /** The control plane answers `job.verified.query` (resume block below); unset: the agent never asks. */
    verified_lookup: Type.Optional(Type.Boolean()),
    /** The control plane relays (set only when `hello.relay` was): binary frames and `relay.*` messages are part of this session. */
    relay: Type.Optional(Type.Boolean()),
  }),
  'job.assign': Type.Object({
    ...JobRef,
    /** Run number of this job (1 on first execute, +1 per retry). */
    attempt: Type.Integer({ minimum: 1 }),
    /** Absent exactly when `relay` is set: the source agent holds the source's settings, never this one. */
    source: Type.Optional(ConnectionSettings),
    source_path: Type.String({ minLength: 1, maxLength: 4096 }),
    destination: ConnectionSettings,
    destination_path: Type.String({ minLength: 1, maxLength: 4096 }),
    options: JobOptions,
    /**
     * Set on a run after the first (a retry, a takeover): the agent asks the control plane which
     * files an earlier attempt recorded verified (`job.verified.query`) and skips those still at
     * the destination; every other file follows `options.overwrite` (docs/agent.md "Resume").
     */
    resume: Type.Boolean(),
    /**
     * The job is relayed (relay-protocol.ts): this agent is its destination side; another agent
     * serves the source. It reads the source through `relay.*` messages and binary frames.
     */
    relay: Type.Optional(Type.Object({ source_type: ConnectionTypeName })),
    /** Apply this stored plan and nothing else (plan-protocol.ts): its items are asked for with `job.plan.query`. */
    plan_id: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
  }),
  'job.cancel': Type.Object({ ...JobRef }),
  'connection.test': Type.Object({ request_id: Type.String({ maxLength: 64 }), connection: ConnectionSettings }),
  ping: Type.Object({ request_id: Type.String({ maxLength: 64 }) }),
  /**
   * These numbered reports are applied and persisted (or were for a run the control plane no
   * longer wants): the agent forgets them. Sent only to agents whose hello set `acks`.
   */
  ack: Type.Object({ seqs: Type.Array(Type.Integer({ minimum: 1 }), { minItems: 1, maxItems: 1000 }) }),
  ...ResumeServerToAgent,
  ...WatchServerToAgent,
  ...SettleServerToAgent,
  ...PlanServerToAgent,
  ...RelayForwarded,
  ...RelayServerToAgent,
} as const;

export type AgentToServerType = keyof typeof AgentToServer;
export type ServerToAgentType = keyof typeof ServerToAgent;
export type PayloadOf<M extends Record<string, TSchema>, T extends keyof M> = Static<M[T]>;

/** A frame as it travels. */
export interface Frame<T extends string = string, P = unknown> {
  v: typeof PROTOCOL_VERSION;
  type: T;
  id: string;
  payload: P;
}

/** Discriminated union of every frame one side sends. */
export type MessageOf<M extends Record<string, TSchema>> = {
  [T in keyof M & string]: Frame<T, Static<M[T]>>;
}[keyof M & string];

export type AgentMessage = MessageOf<typeof AgentToServer>;
export type ServerMessage = MessageOf<typeof ServerToAgent>;

/** Largest text frame either side accepts (a progress batch of 1000 long paths fits). */
export const MAX_FRAME_BYTES = 4 * 1024 * 1024;

const FrameShape = Type.Object({
  v: Type.Literal(PROTOCOL_VERSION),
  type: Type.String({ maxLength: 64 }),
  id: Type.String({ minLength: 1, maxLength: 64 }),
  payload: Type.Unknown(),
});

/**
 * The message types of each direction as a Map built once from its schema record: a type is
 * looked up among the record's own entries only. A lookup on the plain object would find
 * `constructor`, `toString` or `__proto__` on Object.prototype, and TypeBox throws on such a
 * "schema" instead of saying no (issue 12: one such frame stopped the control plane).
 */
const messageTypes = new WeakMap<object, ReadonlyMap<string, TSchema>>(
  [AgentToServer, ServerToAgent].map((schemas) => [schemas, new Map(Object.entries(schemas))]),
);

function typesOf(schemas: Record<string, TSchema>): ReadonlyMap<string, TSchema> {
  let types = messageTypes.get(schemas);
  if (!types) messageTypes.set(schemas, (types = new Map(Object.entries(schemas))));
  return types;
}

/**
 * Parses and validates one text frame against the schemas of one direction. Throws
 * ProtocolError saying what is wrong (never echoing payload values, which may hold secrets).
 * Bytes that are not UTF-8 are refused here, not replaced (the sockets skip ws's own check so
 * that such a frame closes with protocolError like any other bad frame).
 */
export function parseMessage<M extends Record<string, TSchema>>(schemas: M, raw: string | Buffer): MessageOf<M> {
  if (typeof raw !== 'string' && !isUtf8(raw)) throw new ProtocolError('frame is not valid UTF-8');
  const text = typeof raw === 'string' ? raw : raw.toString('utf8');
  if (Buffer.byteLength(text) > MAX_FRAME_BYTES) throw new ProtocolError(`frame larger than ${MAX_FRAME_BYTES} bytes`);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new ProtocolError('frame is not JSON');
  }
  if (!Value.Check(FrameShape, value)) throw new ProtocolError('frame is not {v: 1, type, id, payload}');
  const schema = typesOf(schemas).get(value.type);
  if (!schema) throw new ProtocolError(`unknown message type "${value.type}"`);
  if (!Value.Check(schema, value.payload)) {
    const first = Value.Errors(schema, value.payload).First();
    throw new ProtocolError(`invalid ${value.type} payload${first ? ` at ${first.path || '/'}: ${first.message}` : ''}`);
  }
  return value as MessageOf<M>;
}

let counter = 0;
/** Builds a frame with a fresh id. */
export function frame<M extends Record<string, TSchema>, T extends keyof M & string>(_schemas: M, type: T, payload: Static<M[T]>): Frame<T, Static<M[T]>> {
  counter = (counter + 1) % Number.MAX_SAFE_INTEGER;
  return { v: PROTOCOL_VERSION, type, id: `${Date.now().toString(36)}-${counter.toString(36)}`, payload };
}
