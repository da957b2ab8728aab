import { Type, type Static } from '@sinclair/typebox';
import { Id, PageQuery, Timestamp } from './common.js';

/** Who uploaded a file: the caller's actor (an API key or a user). */
export const FileUploader = Type.Object({ type: Type.String(), id: Type.Union([Type.String(), Type.Null()]) });
export type FileUploader = Static<typeof FileUploader>;

/**
 * A file in the service's own store (decisions.md "Files and share links"). `path` is the folder
 * (`/` or `/a/b`), `size` bytes, `sha256` lower-case hex of the content. Deleted files are never
 * shown, so `deleted_at` appears only where a deleted record is presented on purpose.
 */
export const FileRecord = Type.Object({
  id: Id,
  name: Type.String(),
  path: Type.String(),
  size: Type.Integer({ minimum: 0 }),
  mime_type: Type.String(),
  sha256: Type.String(),
  created_at: Timestamp,
  uploaded_by: FileUploader,
  deleted_at: Type.Optional(Timestamp),
});
export type FileRecord = Static<typeof FileRecord>;

/** A folder path as a query parameter (checked and normalized by the server). */
const FolderPath = Type.String({ minLength: 1, maxLength: 1024 });

/** `GET /files`: the live files directly in `path`, or anywhere below it with `recursive=true`. */
export const ListFilesQuery = Type.Composite(
  [
    PageQuery,
    Type.Object({
      path: Type.Optional(FolderPath),
      recursive: Type.Optional(Type.Boolean({ default: false })),
    }),
  ],
  { additionalProperties: false },
);
export type ListFilesQuery = Static<typeof ListFilesQuery>;

/** `GET /files/search` (decisions.md "Lists"): every given filter must match; sizes in bytes. */
export const SearchFilesQuery = Type.Composite(
  [
    PageQuery,
    Type.Object({
      q: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })),
      type: Type.Optional(Type.String({ minLength: 1, maxLength: 255, pattern: '^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*/(\\*|[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*)$' })),
      min_size: Type.Optional(Type.Integer({ minimum: 0 })),
      max_size: Type.Optional(Type.Integer({ minimum: 0 })),
    }),
  ],
  { additionalProperties: false },
);
export type SearchFilesQuery = Static<typeof SearchFilesQuery>;
