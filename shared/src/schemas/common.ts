import { Kind, Type, TypeRegistry, type Static, type TSchema } from '@sinclair/typebox';

/** Identifier of any stored resource (24 hex characters). */
export const Id = Type.String({ description: 'Resource identifier' });
export type Id = Static<typeof Id>;

export const Timestamp = Type.String({ format: 'date-time', description: 'ISO 8601 UTC timestamp' });

/** Body of every error response. */
export const ErrorBody = Type.Object({ error: Type.String() });
export type ErrorBody = Static<typeof ErrorBody>;

/** Query parameters every list accepts (decisions.md "Lists"). */
export const PageQuery = Type.Object({
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, default: 50 })),
  cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
});
export type PageQuery = Static<typeof PageQuery>;

export const IdParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 64 }) });
export type IdParams = Static<typeof IdParams>;

/** `{data: T}` envelope. */
export const Envelope = <T extends TSchema>(data: T) => Type.Object({ data });

/** `{data: T[], next_cursor}` envelope of every list. */
export const Page = <T extends TSchema>(item: T) =>
  Type.Object({ data: Type.Array(item), next_cursor: Type.Union([Type.String(), Type.Null()]) });
export interface Page<T> { data: T[]; next_cursor: string | null }

/** Answer of every DELETE. */
export const Deleted = Type.Object({ id: Id, deleted: Type.Literal(true) });
export type Deleted = Static<typeof Deleted>;

/** An agent label, which is also the name of a pool of agents: a short tag (`eu-west`, `dc=fra1`). */
export const AgentLabel = Type.String({ minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9][A-Za-z0-9._:/=-]*$' });

/** A non-empty, trimmed display name. */
export const Name = Type.String({ minLength: 1, maxLength: 200, pattern: '\\S' });

// TypeBox's own checker (Value.Check, used by parseMessage) knows only registered kinds.
TypeRegistry.Set<{ enum: readonly string[] }>('StringEnum', (schema, value) => typeof value === 'string' && schema.enum.includes(value));

/** A string enum as a plain JSON-schema `enum`, so a wrong value gets one clear validation error. */
export const StringEnum = <T extends string>(values: readonly T[], options: { description?: string } = {}) =>
  Type.Unsafe<T>({ [Kind]: 'StringEnum', type: 'string', enum: [...values], ...options });

/** Who a schedule or watcher acts as: an API key or a user (docs/security.md "Escalation rules"). */
export const AUTOMATION_OWNER_TYPES = ['api_key', 'user'] as const;
export type AutomationOwnerType = (typeof AUTOMATION_OWNER_TYPES)[number];

/**
 * The owner of a schedule or watcher, read-only: the key or user that last saved it (POST or
 * PUT), whose authority it runs with. Null for one saved before owners were recorded: it runs
 * with the account's authority.
 */
export const AutomationOwner = Type.Union([Type.Object({ type: StringEnum(AUTOMATION_OWNER_TYPES), id: Id }), Type.Null()]);
export type AutomationOwner = Static<typeof AutomationOwner>;
