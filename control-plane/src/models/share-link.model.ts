import { Schema, type Connection, type InferSchemaType } from 'mongoose';

const actorSchema = new Schema({ type: { type: String, required: true }, id: { type: String, default: null } }, { _id: false });

/**
 * A share link of a file (decisions.md "Files and share links"). The token is a bearer secret:
 * only its SHA-256 is stored, and the link is found by that hash.
 *
 * The download path never writes this document. Downloads are counted in `share_downloads`
 * (share-download.model.ts) instead: on FerretDB 1.24 an update reads and writes back the whole
 * document, so a counter kept here would lose concurrent increments and could even undo a
 * concurrent revoke. The only update is the revoke itself.
 */
const schema = new Schema(
  {
    account_id: { type: Schema.Types.ObjectId, required: true },
    file_id: { type: Schema.Types.ObjectId, required: true },
    /** SHA-256 (hex) of the token. */
    token_hash: { type: String, required: true },
    expires_at: { type: Date, required: true },
    /** null: unlimited. */
    max_downloads: { type: Number, default: null },
    revoked_at: { type: Date, default: null },
    revoked_by: { type: actorSchema, default: null },
    created_by: { type: actorSchema, required: true },
    created_at: { type: Date, required: true, default: () => new Date() },
  },
  { collection: 'share_links', autoIndex: false, versionKey: false, minimize: false },
);
schema.index({ token_hash: 1 }, { unique: true });
// The account's links and one file's links, newest first.
schema.index({ account_id: 1, _id: -1 });
schema.index({ account_id: 1, file_id: 1, _id: -1 });

export type ShareLinkDoc = InferSchemaType<typeof schema>;
export const shareLinkModel = (conn: Connection) => conn.model('ShareLink', schema);
