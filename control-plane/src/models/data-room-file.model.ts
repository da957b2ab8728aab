import { Schema, type Connection, type InferSchemaType } from 'mongoose';

const actorSchema = new Schema({ type: { type: String, required: true }, id: { type: String, default: null } }, { _id: false });

/**
 * A file of the account's store put in a data room. The content stays the store's file
 * (file.model.ts): removing it from the room removes this entry only, and a file deleted from
 * the store disappears from every room. A file is in a room at most once (the unique index).
 */
const schema = new Schema(
  {
    account_id: { type: Schema.Types.ObjectId, required: true },
    room_id: { type: Schema.Types.ObjectId, required: true },
    file_id: { type: Schema.Types.ObjectId, required: true },
    added_by: { type: actorSchema, required: true },
    added_at: { type: Date, required: true, default: () => new Date() },
  },
  { collection: 'data_room_files', autoIndex: false, versionKey: false, minimize: false },
);
schema.index({ room_id: 1, file_id: 1 }, { unique: true });
// A room's files, newest first.
schema.index({ room_id: 1, _id: -1 });

export type DataRoomFileDoc = InferSchemaType<typeof schema>;
export const dataRoomFileModel = (conn: Connection) => conn.model('DataRoomFile', schema);
