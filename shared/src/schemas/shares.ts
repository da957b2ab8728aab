import { Type, type Static } from '@sinclair/typebox';
import { Id, PageQuery, StringEnum, Timestamp } from './common.js';
import { Actor } from './activity.js';

/**
 * Where a share link stands. One value, by precedence: a revoked link says `revoked` even when
 * it has also expired; then `file_deleted`, `expired`, `exhausted` (max_downloads reached).
 */
export const SHARE_LINK_STATUSES = ['active', 'revoked', 'file_deleted', 'expired', 'exhausted'] as const;
export type ShareLinkStatus = (typeof SHARE_LINK_STATUSES)[number];

/** Default and largest `expires_in_hours` (decisions.md "Files and share links"). */
export const SHARE_DEFAULT_EXPIRES_IN_HOURS = 24;
export const SHARE_MAX_EXPIRES_IN_HOURS = 8760;
/** Largest finite `max_downloads` (absent means unlimited). */
export const SHARE_MAX_DOWNLOADS = 1_000_000;

/** A share link as listed: never its token, which exists only in the create response. */
export const ShareLink = Type.Object({
  id: Id,
  file_id: Id,
  status: StringEnum(SHARE_LINK_STATUSES),
  expires_at: Timestamp,
  /** null: unlimited. */
  max_downloads: Type.Union([Type.Integer(), Type.Null()]),
  /** Downloads that started a body (GET answered 200 or 206). */
  downloads: Type.Integer(),
  revoked_at: Type.Union([Timestamp, Type.Null()]),
  created_at: Timestamp,
  created_by: Actor,
});
export type ShareLink = Static<typeof ShareLink>;

/** Answer of a create: the link with its token and URL, shown this once only. */
export const CreatedShareLink = Type.Intersect([
  ShareLink,
  Type.Object({
    token: Type.String(),
    /** `/api/v1/files/shared/<token>`, relative to the server's origin. */
    url: Type.String(),
  }),
]);
export type CreatedShareLink = Static<typeof CreatedShareLink>;

export const CreateShareLinkRequest = Type.Object(
  {
    expires_in_hours: Type.Optional(Type.Integer({ minimum: 1, maximum: SHARE_MAX_EXPIRES_IN_HOURS })),
    max_downloads: Type.Optional(Type.Integer({ minimum: 1, maximum: SHARE_MAX_DOWNLOADS })),
  },
  { additionalProperties: false },
);
export type CreateShareLinkRequest = Static<typeof CreateShareLinkRequest>;

export const ShareLinkParams = Type.Object({
  id: Type.String({ minLength: 1, maxLength: 64 }),
  share_id: Type.String({ minLength: 1, maxLength: 64 }),
});
export type ShareLinkParams = Static<typeof ShareLinkParams>;

/** The token is checked by the handler (malformed is 404, like unknown), so the schema stays loose. */
export const SharedTokenParams = Type.Object({ token: Type.String() });
export type SharedTokenParams = Static<typeof SharedTokenParams>;

/** Paging only: unknown query parameters are 400, as on every list. */
export const ListShareLinksQuery = Type.Composite([PageQuery], { additionalProperties: false });
export type ListShareLinksQuery = Static<typeof ListShareLinksQuery>;

/** Answers of the unauthenticated download that clients and tests match on. */
export const ShareLinkMessages = {
  notFound: 'Share link not found',
  revoked: 'Share link has been revoked',
  fileDeleted: 'The shared file has been deleted',
  expired: 'Share link has expired',
  exhausted: 'Share link download limit reached',
} as const;
