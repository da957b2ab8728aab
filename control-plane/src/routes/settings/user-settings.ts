import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { PageQuery, UpdateAvatarRequest, type AvatarSetting, type SessionsRevoked, type SessionsSetting } from '@xfer/shared';
import { consoleUserOf, type SessionClaims, type StoredSetting } from '../../plugins/app/access/index.js';
import { isoOrNull } from './iso-or-null.js';

const consoleOnly = { access: { consoleOnly: true } } as const;

/** Claims of the session making the call (already verified by the auth hook). */
function sessionClaims(request: FastifyRequest): (SessionClaims & { exp?: number }) | null {
  const token = /^Bearer +(\S+)$/i.exec(request.headers.authorization ?? '')?.[1];
  return token ? request.server.jwt.decode<SessionClaims & { exp?: number }>(token) : null;
}

const presentAvatar = (stored: StoredSetting<{ url: string | null }> | null): AvatarSetting => ({
  url: stored?.value.url ?? null,
  updated_at: isoOrNull(stored?.updated_at),
});

/** Settings of the signed-in user: sessions, login-events, avatar (mfa: mfa-settings.ts). */
const userSettings: FastifyPluginAsync = async (fastify) => {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const mine = (request: FastifyRequest) => {
    const user = consoleUserOf(request);
    return { user, owner: { accountId: user.accountId, userId: user.userId } };
  };

  app.get('/settings/sessions', { config: consoleOnly }, async (request) => {
    const { user } = mine(request);
    const validAfter = await app.settings.sessionsValidAfter(user);
    const exp = sessionClaims(request)?.exp;
    const data: SessionsSetting = {
      sessions_valid_after: isoOrNull(validAfter),
      session_ttl_seconds: app.config.sessionTtlSeconds,
      current_session_expires_at: typeof exp === 'number' ? new Date(exp * 1000).toISOString() : null,
    };
    return { data };
  });

  /** Sign out everywhere: every session of this user issued up to now stops working, this one included. */
  app.delete('/settings/sessions', { config: consoleOnly }, async (request) => {
    const { user } = mine(request);
    // At least one millisecond past this session's issue time, which the auth hook compares with.
    const cutoff = new Date(Math.max(Date.now(), (sessionClaims(request)?.iat_ms ?? 0) + 1));
    await app.settings.signOutEverywhere(user, request, cutoff);
    const data: SessionsRevoked = { id: user.userId, deleted: true, sessions_valid_after: cutoff.toISOString() };
    return { data };
  });

  /** This user's sign-ins, successful and failed, newest first. */
  app.get('/settings/login-events', { schema: { querystring: PageQuery }, config: consoleOnly }, async (request) => {
    const { user } = mine(request);
    return app.activity.loginEvents(user.accountId, user.userId, request.query);
  });

  app.get('/settings/avatar', { config: consoleOnly }, async (request) => {
    const { owner } = mine(request);
    return { data: presentAvatar(await app.settings.get(owner, 'avatar')) };
  });

  app.put('/settings/avatar', { schema: { body: UpdateAvatarRequest }, config: consoleOnly }, async (request) => {
    const { owner } = mine(request);
    const stored = await app.settings.put(request, owner, 'avatar', { url: request.body.url }, { url: request.body.url });
    return { data: presentAvatar(stored) };
  });
};

export default userSettings;
