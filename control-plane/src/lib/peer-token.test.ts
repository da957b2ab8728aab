import { randomBytes } from 'node:crypto';
import { MAX_PEER_TOKEN_TTL_MS, signPeerToken, verifyPeerToken } from './peer-token.js';

const claims = { job_id: 'a'.repeat(24), attempt: 2, source_agent_id: 'b'.repeat(24), instance_id: 'host:1:abcd', expires_at: Date.now() + 60_000 };
const [active, retired] = [randomBytes(32), randomBytes(32)];

test('a token signed with any configured key verifies, with its claims and a fresh nonce', () => {
  const one = verifyPeerToken([active, retired], signPeerToken(active, claims));
  const two = verifyPeerToken([active, retired], signPeerToken(retired, claims));
  expect(one).toMatchObject(claims);
  expect(two).toMatchObject(claims);
  expect(one!.nonce).not.toBe(two!.nonce);
});

test('forged, altered, expired, too long-lived or malformed tokens are refused alike', () => {
  const token = signPeerToken(active, claims);
  const [body, mac] = token.split('.') as [string, string];
  const altered = Buffer.from(JSON.stringify({ ...JSON.parse(Buffer.from(body, 'base64url').toString()), attempt: 3 })).toString('base64url');
  for (const bad of [
    signPeerToken(randomBytes(32), claims),
    `${altered}.${mac}`,
    `${body}.${mac.slice(0, -2)}`,
    `${body}.${mac}.x`,
    `${body}`,
    '',
    'x'.repeat(3000),
    signPeerToken(active, { ...claims, expires_at: Date.now() - 1 }),
    signPeerToken(active, { ...claims, expires_at: Date.now() + MAX_PEER_TOKEN_TTL_MS + 60_000 }),
    signPeerToken(active, { ...claims, job_id: 'not-an-id' }),
    signPeerToken(active, { ...claims, attempt: 0 }),
  ]) {
    expect(verifyPeerToken([active, retired], bad)).toBeNull();
  }
});
