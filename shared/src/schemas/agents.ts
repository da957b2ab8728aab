import { Type, type Static } from '@sinclair/typebox';
import { AgentLabel, Id, Name, PageQuery, StringEnum, Timestamp } from './common.js';
import { ConnectionTypeName } from './connections.js';
import { Actor } from './activity.js';

/** `online`: a session is open on some control-plane instance and was refreshed recently. */
export const AGENT_STATUSES = ['online', 'offline'] as const;
export type AgentStatus = (typeof AGENT_STATUSES)[number];

/** Shown once, beside the token, in the create response. */
export const AGENT_TOKEN_WARNING = 'Store this token now: it cannot be shown again.';

/** A managed agent as every read shows it (decisions.md "Agents"). The token is never part of it. */
export const Agent = Type.Object({
  id: Id,
  name: Type.String(),
  /** Labels the account gave the agent (`POST`/`PUT /agents`). */
  labels: Type.Array(Type.String()),
  /** Labels the agent's operator gave it (`xfer-agent start --label`), from its last `hello`. */
  agent_labels: Type.Array(Type.String()),
  /** The pools the agent belongs to: `labels` and `agent_labels` together, each once. */
  pools: Type.Array(Type.String()),
  status: StringEnum(AGENT_STATUSES),
  /** When the agent was last heard from; null before its first connection. */
  last_seen_at: Type.Union([Timestamp, Type.Null()]),
  /** From the agent's last `hello`; null before its first connection. */
  version: Type.Union([Type.String(), Type.Null()]),
  hostname: Type.Union([Type.String(), Type.Null()]),
  connector_types: Type.Array(ConnectionTypeName),
  /** Ids of the transfer jobs in progress on this agent (either side of a relay included). */
  running_jobs: Type.Array(Id),
  /** The account's limit of jobs at once (`PUT /agents/:id`); null: the agent's own `agent_max_jobs` alone. */
  max_jobs: Type.Union([Type.Integer(), Type.Null()]),
  /** The agent's own limit (`xfer-agent start --max-jobs`), from its last `hello`; null before its first connection. */
  agent_max_jobs: Type.Union([Type.Integer(), Type.Null()]),
  /**
   * Job slots: `total` is the effective limit (`max_jobs` bounded by `agent_max_jobs`; 0 before
   * the first connection), `running` the slots held now (each side of a relay holds one), `free`
   * what is left (never below 0: a lowered limit lets running jobs finish).
   */
  slots: Type.Object({ total: Type.Integer(), running: Type.Integer(), free: Type.Integer() }),
  /** The agent can play either side of a relay (its last `hello`). */
  relay: Type.Boolean(),
  /**
   * Approved by an administrator (`POST /agents/:id/approve`, or created by one): only an approved
   * agent serves connections not pinned to it (`agent_pool` or neither). A pending agent serves
   * only connections pinned to it by `agent_id`, and belongs to no pool.
   */
  approved: Type.Boolean(),
  /** When it was approved; null while pending, and for agents stored before approval existed. */
  approved_at: Type.Union([Timestamp, Type.Null()]),
  /** Who approved it (or created it approved); null while pending, and for agents stored before approval existed. */
  approved_by: Type.Union([Actor, Type.Null()]),
  created_at: Timestamp,
});
export type Agent = Static<typeof Agent>;

/** Answer of a create: the only time the token (`agt_…`) is shown. */
export const CreatedAgent = Type.Intersect([Agent, Type.Object({ token: Type.String() })]);
export type CreatedAgent = Static<typeof CreatedAgent>;

export const CreateAgentRequest = Type.Object(
  {
    name: Name,
    labels: Type.Optional(Type.Array(AgentLabel, { maxItems: 32, uniqueItems: true })),
  },
  { additionalProperties: false },
);
export type CreateAgentRequest = Static<typeof CreateAgentRequest>;

/**
 * PUT /agents/:id: only the given fields change. `labels` replaces the account's labels (the
 * agent's own `--label`s stay); `max_jobs` caps the jobs the agent runs at once below its own
 * `--max-jobs` (null: the agent's own limit alone).
 */
export const UpdateAgentRequest = Type.Object(
  {
    name: Type.Optional(Name),
    labels: Type.Optional(Type.Array(AgentLabel, { maxItems: 32, uniqueItems: true })),
    max_jobs: Type.Optional(Type.Union([Type.Integer({ minimum: 1, maximum: 1000 }), Type.Null()])),
  },
  { additionalProperties: false, minProperties: 1 },
);
export type UpdateAgentRequest = Static<typeof UpdateAgentRequest>;

export const ListAgentsQuery = Type.Composite([PageQuery], { additionalProperties: false });
export type ListAgentsQuery = Static<typeof ListAgentsQuery>;

/**
 * Answer of `POST /agents/:id/test` (a ping round trip) and `POST /connections/:id/test` (the
 * check run by the agent serving the connection). 200 even when `success` is false.
 */
export const TestResult = Type.Object({
  success: Type.Boolean(),
  message: Type.String(),
  latency_ms: Type.Number({ minimum: 0 }),
});
export type TestResult = Static<typeof TestResult>;

/** Body of the create response: the agent with its token, and the one-time warning. */
export const CreateAgentResponse = Type.Object({ data: CreatedAgent, warning: Type.String() });
export type CreateAgentResponse = Static<typeof CreateAgentResponse>;
