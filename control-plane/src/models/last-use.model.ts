import { Schema, type Connection, type InferSchemaType } from 'mongoose';

/**
 * When an API key was last used or a user last signed in: one document per key or user (`_id` =
 * its id, `kind` says which). Kept apart from `api_keys` and `users` so that these frequent
 * writes never touch the documents that hold what a caller may do: on FerretDB an update writes
 * the whole document back, so a use recorded in the key's document while the key was being
 * revoked undid the revocation (131 of 200 revocations lost when both ran at once, measured
 * against the test FerretDB), and a sign-in could likewise undo a role change, a new password or
 * "sign out everywhere". Keys' and users' documents are written only by what changes them.
 */
const schema = new Schema(
  {
    _id: { type: Schema.Types.ObjectId, required: true },
    account_id: { type: Schema.Types.ObjectId, required: true },
    kind: { type: String, required: true, enum: ['api_key', 'user'] },
    at: { type: Date, required: true },
  },
  { collection: 'last_uses', autoIndex: false, versionKey: false },
);

export type LastUseDoc = InferSchemaType<typeof schema>;
export const lastUseModel = (conn: Connection) => conn.model('LastUse', schema);

/** `at` of each of `ids` that has a record, by id: one read for a page of keys or users. */
export async function lastUsesOf(model: ReturnType<typeof lastUseModel>, accountId: unknown, ids: unknown[]): Promise<Map<string, Date>> {
  if (ids.length === 0) return new Map();
  const docs = await model.find({ _id: { $in: ids }, account_id: accountId }, { at: 1 }).lean();
  return new Map(docs.map((d) => [String(d._id), d.at]));
}

/** The later of a stored date (kept from before `last_uses`) and the record's. */
export function later(a: Date | null | undefined, b: Date | null | undefined): Date | null {
  if (!a) return b ?? null;
  if (!b) return a;
  return b > a ? b : a;
}
