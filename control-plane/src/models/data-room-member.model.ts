import { Schema, type Connection, type InferSchemaType } from 'mongoose';

const actorSchema = new Schema({ type: { type: String, required: true }, id: { type: String, default: null } }, { _id: false });

/**
 * An outside party invited to a data room. The invite token is a bearer secret like a share
 * link's: only its SHA-256 is stored, and the member is found by that hash. The token routes
 * never write this document (a read does no write); the only update is the revoke.
 */
const schema = new Schema(
  {
    account_id: { type: Schema.Types.ObjectId, required: true },
    room_id: { type: Schema.Types.ObjectId, required: true },
    email: { type: String, required: true },
    role: { type: String, enum: ['viewer', 'contributor'], required: true },
    /** SHA-256 (hex) of the invite token. */
    token_hash: { type: String, required: true },
    /** null: the access ends with the room's. */
    expires_at: { type: Date, default: null },
    revoked_at: { type: Date, default: null },
    revoked_by: { type: actorSchema, default: null },
    created_by: { type: actorSchema, required: true },
    created_at: { type: Date, required: true, default: () => new Date() },
  },
  { collection: 'data_room_members', autoIndex: false, versionKey: false, minimize: false },
);
schema.index({ token_hash: 1 }, { unique: true });
// A room's members, newest first.
schema.index({ room_id: 1, _id: -1 });

export type DataRoomMemberDoc = InferSchemaType<typeof schema>;
export const dataRoomMemberModel = (conn: Connection) => conn.model('DataRoomMember', schema);
