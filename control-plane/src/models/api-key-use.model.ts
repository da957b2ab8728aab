import { Schema, type Connection, type InferSchemaType } from 'mongoose';

/**
 * When an API key was last used, one document per key (`_id` = the key's id), written by the
 * auth service at most once a minute per key and instance. Kept apart from `api_keys` so that
 * the sampled write never touches the key's own document: on FerretDB an update writes the whole
 * document back, and a touch racing a revocation undid it (131 of 200 revocations lost when both
 * ran at once, measured against the test FerretDB). A key's document is written only by its
 * creation and its revocation.
 */
const schema = new Schema(
  {
    _id: { type: Schema.Types.ObjectId, required: true },
    account_id: { type: Schema.Types.ObjectId, required: true },
    last_used_at: { type: Date, required: true },
  },
  { collection: 'api_key_uses', autoIndex: false, versionKey: false },
);

export type ApiKeyUseDoc = InferSchemaType<typeof schema>;
export const apiKeyUseModel = (conn: Connection) => conn.model('ApiKeyUse', schema);
