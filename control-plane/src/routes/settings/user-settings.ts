import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { PageQuery, UpdateAvatarRequest, type AvatarSetting, type SessionsRevoked, type SessionsSetting } from '@xfer/shared';
import { NotFoundError } from '../../errors.js';
import { paginate } from '../../lib/pagination.js';
import type { SessionClaims } from '../../plugins/app/access/index.js';
import { presentAuditEvent } from '../../plugins/app/activity/activity.service.js';
import { auditedSettingChange, consoleUserOf, isoOrNull, SettingsStore, type StoredSetting } from '../../plugins/app/access/settings.service.js';

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
  const store = new SettingsStore(app.db);
  const mine = (request: FastifyRequest) => {
    const user = consoleUserOf(request);
    return { user, owner: { accountId: user.accountId, userId: user.userId } };
  };

  app.get('/settings/sessions', { config: consoleOnly }, async (request) => {
    const { user } = mine(request);
    const doc = await app.db.users.findById(user.userId).lean();
    if (!doc) throw new NotFoundError('User not found');
    const exp = sessionClaims(request)?.exp;
    const data: SessionsSetting = {
      sessions_valid_after: isoOrNull(doc.sessions_valid_after),
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
    await auditedSettingChange(app, request, 'sessions', 'user', { sign_out_everywhere: true }, async () => {
      const updated = await app.db.users.updateOne({ _id: user.userId, account_id: user.accountId }, { $set: { sessions_valid_after: cutoff } });
      if (updated.matchedCount === 0) throw new NotFoundError('User not found');
    });
    const data: SessionsRevoked = { id: user.userId, deleted: true, sessions_valid_after: cutoff.toISOString() };
    return { data };
  });

  /** This user's sign-ins, successful and failed, newest first. */
  app.get('/settings/login-events', { schema: { querystring: PageQuery }, config: consoleOnly }, async (request) => {
    const { user } = mine(request);
    const filter = { account_id: user.accountId, action: 'auth.login', 'actor.type': 'user', 'actor.id': user.userId };
    return paginate(app.db.auditEvents, filter, request.query, presentAuditEvent);
  });

  app.get('/settings/avatar', { config: consoleOnly }, async (request) => {
    const { owner } = mine(request);
    return { data: presentAvatar(await store.get(owner, 'avatar')) };
  });

  app.put('/settings/avatar', { schema: { body: UpdateAvatarRequest }, config: consoleOnly }, async (request) => {
    const { owner } = mine(request);
    const stored = await auditedSettingChange(app, request, 'avatar', 'user', { url: request.body.url }, () => store.put(owner, 'avatar', { url: request.body.url }));
    return { data: presentAvatar(stored) };
  });
};

export default userSettings;
