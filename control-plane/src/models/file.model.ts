import { Schema, type Connection, type InferSchemaType } from 'mongoose';

const actorSchema = new Schema({ type: { type: String, required: true }, id: { type: String, default: null } }, { _id: false });

/**
 * A file in the service's own store (decisions.md "Files and share links"). Written only after
 * the upload was scanned clean and its content committed to the file store under `storage_key`.
 * A soft-deleted file (`deleted_at` set) disappears from list, search, download and share links
 * but keeps its record and content for audit.
 */
const schema = new Schema(
  {
    account_id: { type: Schema.Types.ObjectId, required: true },
    /** File name (one path segment, as uploaded). */
    name: { type: String, required: true },
    /** Lower-cased `name`, so the case-insensitive search needs no regex `i` flag (no collation on FerretDB). */
    name_lower: { type: String, required: true },
    /** Normalized folder: `/` or `/a/b` (no trailing slash). */
    path: { type: String, required: true },
    size: { type: Number, required: true },
    mime_type: { type: String, required: true },
    sha256: { type: String, required: true },
    /** Key of the content in the file store (never shown). */
    storage_key: { type: String, required: true },
    uploaded_by: { type: actorSchema, required: true },
    created_at: { type: Date, required: true, default: () => new Date() },
    deleted_at: { type: Date, default: null },
    deleted_by: { type: actorSchema, default: null },
    /**
     * When the retention sweeper removed the content of a deleted file from the store (its
     * `deleted_files_days` after `deleted_at`): the record stays, for the audit trail that names it.
     */
    purged_at: { type: Date, default: null },
  },
  { collection: 'files', autoIndex: false, versionKey: false, minimize: false },
);
// List by folder and search filters all start at the account's live files, newest first.
schema.index({ account_id: 1, deleted_at: 1, path: 1, _id: -1 });
schema.index({ account_id: 1, deleted_at: 1, _id: -1 });
schema.index({ account_id: 1, deleted_at: 1, mime_type: 1, _id: -1 });
schema.index({ account_id: 1, deleted_at: 1, size: 1 });
// The retention sweeper's: an account's deleted files still in the store, oldest deletion first.
schema.index({ account_id: 1, purged_at: 1, deleted_at: 1 });

export type FileDoc = InferSchemaType<typeof schema>;
export const fileModel = (conn: Connection) => conn.model('File', schema);
