import { timingSafeEqual } from 'node:crypto';

/**
 * Whether two connections act with the same authority, for a server-side copy (docs/connectors.md
 * "Server-side copies"): their `account` digests (a hash or HMAC over the endpoint and the
 * secrets, made by each connector's config) compared in constant time. Null (no secret that
 * identifies the account, e.g. a SAS connection) never matches.
 */
export function sameAuthority(a: Buffer | null, b: Buffer | null): boolean {
  return a !== null && b !== null && a.length === b.length && timingSafeEqual(a, b);
}
