import { Type, type Static } from '@sinclair/typebox';
import { Id, Name, Timestamp } from './common.js';

export const ApiKey = Type.Object({
  id: Id,
  name: Type.String(),
  key_prefix: Type.String(),
  scopes: Type.Array(Type.String()),
  created_at: Timestamp,
  expires_at: Type.Union([Timestamp, Type.Null()]),
  last_used_at: Type.Union([Timestamp, Type.Null()]),
  revoked_at: Type.Union([Timestamp, Type.Null()]),
});
export type ApiKey = Static<typeof ApiKey>;

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
  },
  { additionalProperties: false },
);
export type CreateApiKeyRequest = Static<typeof CreateApiKeyRequest>;
