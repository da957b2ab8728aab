import { Schema, type Connection, type InferSchemaType } from 'mongoose';

const actorSchema = new Schema({ type: { type: String, required: true }, id: { type: String, default: null } }, { _id: false });

/**
 * A data room (scope-areas.md "Data rooms"): a named set of the account's files opened to
 * invited outside parties (data-room-member.model.ts). A deleted room is kept with `deleted_at`
 * so that its members' invites answer 410 rather than 404; every account-side query skips it.
 */
const schema = new Schema(
  {
    account_id: { type: Schema.Types.ObjectId, required: true },
    name: { type: String, required: true },
    description: { type: String, default: null },
    /** null: the room does not expire. */
    expires_at: { type: Date, default: null },
    /** Bytes the uploads into the room may hold together; absent (rooms made before quotas): the service's default. */
    quota_bytes: { type: Number },
    created_by: { type: actorSchema, required: true },
    created_at: { type: Date, required: true, default: () => new Date() },
    updated_at: { type: Date, required: true, default: () => new Date() },
    deleted_at: { type: Date, default: null },
  },
  { collection: 'data_rooms', autoIndex: false, versionKey: false, minimize: false },
);
schema.index({ account_id: 1, deleted_at: 1, _id: -1 });

export type DataRoomDoc = InferSchemaType<typeof schema>;
export const dataRoomModel = (conn: Connection) => conn.model('DataRoom', schema);
