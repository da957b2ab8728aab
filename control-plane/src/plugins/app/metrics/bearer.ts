import { createHash, timingSafeEqual } from 'node:crypto';

const digest = (text: string) => createHash('sha256').update(text).digest();

/**
 * Whether an `Authorization` header carries `Bearer <token>`. Compared as SHA-256 digests with
 * timingSafeEqual: equal lengths whatever was sent, and no early exit that times the prefix.
 */
export function bearerMatches(header: string | undefined, token: string): boolean {
  const given = /^Bearer +(\S+)$/i.exec(header ?? '')?.[1] ?? '';
  return timingSafeEqual(digest(given), digest(token));
}
