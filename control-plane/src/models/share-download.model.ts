import { Schema, type Connection, type InferSchemaType } from 'mongoose';

/**
 * One document per download of a share link: download number `n` of link `share_id`. The unique
 * index hands each number to exactly one request, so with `n <= max_downloads` no link is ever
 * downloaded more often than allowed, on MongoDB and on FerretDB alike (whose updates are not
 * atomic: see rate-limit-slot.model.ts). A link's download count is the number of its documents.
 */
const schema = new Schema(
  {
    share_id: { type: Schema.Types.ObjectId, required: true },
    n: { type: Number, required: true },
    created_at: { type: Date, required: true, default: () => new Date() },
  },
  { collection: 'share_downloads', autoIndex: false, versionKey: false },
);
schema.index({ share_id: 1, n: 1 }, { unique: true });

export type ShareDownloadDoc = InferSchemaType<typeof schema>;
export const shareDownloadModel = (conn: Connection) => conn.model('ShareDownload', schema);
