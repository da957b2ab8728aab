import { Type, type Static } from '@sinclair/typebox';
import { Id, Name, PageQuery, StringEnum, Timestamp } from './common.js';
import { ConnectionTypeName } from './connections.js';

/** `online`: a session is open on some control-plane instance and was refreshed recently. */
export const AGENT_STATUSES = ['online', 'offline'] as const;
export type AgentStatus = (typeof AGENT_STATUSES)[number];

/** Shown once, beside the token, in the create response. */
export const AGENT_TOKEN_WARNING = 'Store this token now: it cannot be shown again.';

/** A label: a short tag used to tell agents apart (`eu-west`, `dc=fra1`). */
export const AgentLabel = Type.String({ minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9][A-Za-z0-9._:/=-]*$' });

/** A managed agent as every read shows it (decisions.md "Agents"). The token is never part of it. */
export const Agent = Type.Object({
  id: Id,
  name: Type.String(),
  labels: Type.Array(Type.String()),
  status: StringEnum(AGENT_STATUSES),
  /** When the agent was last heard from; null before its first connection. */
  last_seen_at: Type.Union([Timestamp, Type.Null()]),
  /** From the agent's last `hello`; null before its first connection. */
  version: Type.Union([Type.String(), Type.Null()]),
  hostname: Type.Union([Type.String(), Type.Null()]),
  connector_types: Type.Array(ConnectionTypeName),
  /** Ids of the transfer jobs in progress on this agent. */
  running_jobs: Type.Array(Id),
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
