import { Schema, type Connection, type InferSchemaType } from 'mongoose';

/** Console-only settings: one document per account (user_id null) or per user, per setting name. */
const schema = new Schema(
  {
    account_id: { type: Schema.Types.ObjectId, required: true },
    user_id: { type: Schema.Types.ObjectId, default: null },
    name: { type: String, required: true },
    value: { type: Schema.Types.Mixed, required: true },
    updated_at: { type: Date, required: true, default: () => new Date() },
  },
  { collection: 'settings', autoIndex: false, versionKey: false, minimize: false },
);
schema.index({ account_id: 1, user_id: 1, name: 1 }, { unique: true });

export type SettingDoc = InferSchemaType<typeof schema>;
export const settingModel = (conn: Connection) => conn.model('Setting', schema);
