import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * What a relay peer-link token grants (docs/security.md "Relay peer links"): the instance
 * `instance_id` serves the source side of job `job_id`'s attempt `attempt`, whose source agent is
 * `source_agent_id`, for one link opened before `expires_at` (ms since the epoch). `nonce` makes
 * each token single-use at that instance.
 */
export interface PeerLinkClaims {
  job_id: string;
  attempt: number;
  source_agent_id: string;
  instance_id: string;
  expires_at: number;
  nonce: string;
}

/** Longest lifetime a token may claim: it only has to cover the dial. */
export const MAX_PEER_TOKEN_TTL_MS = 5 * 60_000;
const ID = /^[0-9a-f]{24}$/;

function mac(key: Buffer, body: string): Buffer {
  return createHmac('sha256', key).update(`xfer-relay-link.${body}`).digest();
}

/** `base64url(JSON claims).base64url(HMAC-SHA256)`, under `key` (the first of Vault.derivedKeys). */
export function signPeerToken(key: Buffer, claims: Omit<PeerLinkClaims, 'nonce'>): string {
  const body = Buffer.from(JSON.stringify({ ...claims, nonce: randomBytes(16).toString('base64url') })).toString('base64url');
  return `${body}.${mac(key, body).toString('base64url')}`;
}

function wellFormed(value: unknown): value is PeerLinkClaims {
  const c = value as Partial<PeerLinkClaims> | null;
  return typeof c === 'object' && c !== null
    && typeof c.job_id === 'string' && ID.test(c.job_id)
    && Number.isSafeInteger(c.attempt) && c.attempt! >= 1
    && typeof c.source_agent_id === 'string' && ID.test(c.source_agent_id)
    && typeof c.instance_id === 'string' && c.instance_id.length > 0 && c.instance_id.length <= 256
    && Number.isSafeInteger(c.expires_at)
    && typeof c.nonce === 'string' && c.nonce.length >= 16 && c.nonce.length <= 64;
}

/**
 * The claims of a token whose MAC one of `keys` made (each compared in constant time) and that
 * has not expired; null for anything else (forged, altered, expired, claiming too long a life,
 * malformed), without saying which.
 */
export function verifyPeerToken(keys: Buffer[], token: string, now = Date.now()): PeerLinkClaims | null {
  if (token.length > 2048) return null;
  const dot = token.indexOf('.');
  if (dot <= 0 || dot !== token.lastIndexOf('.')) return null;
  const body = token.slice(0, dot);
  const given = Buffer.from(token.slice(dot + 1), 'base64url');
  let valid = false;
  for (const key of keys) {
    const expected = mac(key, body);
    // Every key is tried, so the time taken does not say which one matched.
    if (given.length === expected.length && timingSafeEqual(given, expected)) valid = true;
  }
  if (!valid) return null;
  let claims: unknown;
  try {
    claims = JSON.parse(Buffer.from(body, 'base64url').toString('utf8'));
  } catch {
    return null;
  }
  if (!wellFormed(claims) || claims.expires_at < now || claims.expires_at > now + MAX_PEER_TOKEN_TTL_MS) return null;
  return claims;
}
