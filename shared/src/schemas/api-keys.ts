import { Type, type Static } from '@sinclair/typebox';
import { Id, Name, PageQuery, Timestamp } from './common.js';

/** A registered service principal's client id (`/settings/service-principals`). */
const ClientId = Type.String({ minLength: 1, maxLength: 200, pattern: '^\\S+$' });

export const ApiKey = Type.Object({
  id: Id,
  name: Type.String(),
  key_prefix: Type.String(),
  scopes: Type.Array(Type.String()),
  created_at: Timestamp,
  expires_at: Type.Union([Timestamp, Type.Null()]),
  last_used_at: Type.Union([Timestamp, Type.Null()]),
  revoked_at: Type.Union([Timestamp, Type.Null()]),
  /** The client id of the service principal the key was issued for (it acts as that principal), or null. */
  service_principal: Type.Union([Type.String(), Type.Null()]),
});
export type ApiKey = Static<typeof ApiKey>;

/** `GET /api-keys`: one page, optionally only the keys of one service principal. */
export const ListApiKeysQuery = Type.Composite([PageQuery, Type.Object({ service_principal: Type.Optional(ClientId) })], { additionalProperties: false });
export type ListApiKeysQuery = Static<typeof ListApiKeysQuery>;

/** Answer of a create: the only time the full key is shown. */
export const CreatedApiKey = Type.Intersect([ApiKey, Type.Object({ key: Type.String() })]);
export type CreatedApiKey = Static<typeof CreatedApiKey>;

export const CreateApiKeyRequest = Type.Object(
  {
    name: Name,
    scopes: Type.Array(Type.String({ minLength: 1, maxLength: 64 }), { minItems: 1, maxItems: 64, uniqueItems: true }),
    expires_in_days: Type.Optional(Type.Integer({ minimum: 1, maximum: 3650 })),
    /** An exact end of life instead of a number of days (not both); an expiring caller's keys must end by its own. */
    expires_at: Type.Optional(Type.String({ format: 'date-time' })),
    /** Issue the key for this registered service principal (its client_id): the key acts as it. */
    service_principal: Type.Optional(ClientId),
  },
  { additionalProperties: false },
);
export type CreateApiKeyRequest = Static<typeof CreateApiKeyRequest>;
