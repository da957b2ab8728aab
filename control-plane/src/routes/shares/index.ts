import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import {
  CreatedShareLink, CreateShareLinkRequest, Deleted, Envelope, IdParams, ListShareLinksQuery, Page, ShareLink, ShareLinkParams,
  SHARE_DEFAULT_EXPIRES_IN_HOURS, SharedTokenParams,
} from '@xfer/shared';
import { ForbiddenError } from '../../errors.js';
import { callerExpiresAt, principalOf, requireExpiryWithin, type Principal } from '../../plugins/app/access/index.js';
import { shareUrl } from '../../plugins/app/files/shares.service.js';
import { sendStoredFile } from '../files/send-file.js';

const shareNeedsRead = (p: Principal) =>
  `A share link lets anyone holding it download the file: creating one needs files:read, which ${p.kind === 'api_key' ? 'the calling key' : `your role (${p.role})`} does not hold`;

/**
 * Share links (api.md "Share link"; decisions.md "Files and share links"; docs/api.md "Share
 * links"). The token leaves the server once, in the create response: lists, events, audit
 * records and logs carry the link's id instead.
 */
const shares: FastifyPluginAsync = async (fastify) => {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();

  app.post('/files/:id/share', {
    schema: { params: IdParams, body: CreateShareLinkRequest, response: { 201: Envelope(CreatedShareLink) } },
    // Every field is optional, so a POST without a body asks for the defaults (a JSON null is still 400).
    config: { access: { scope: 'files:write' }, optionalBody: true },
    preValidation: async (request) => {
      if (request.body === undefined) request.body = {};
    },
  }, async (request, reply) => {
    const principal = principalOf(request);
    const { expires_in_hours, max_downloads } = request.body;
    // The link is a read credential for the file: minting one needs the read the caller passes
    // on, and it may not outlive an expiring key that mints it.
    const denied = async (reason: string, err: Error) => {
      await app.audit.recordRequest(request, { action: 'file.share', outcome: 'denied', resource: { type: 'file', id: request.params.id }, details: { reason } });
      throw err;
    };
    if (!principal.scopes.has('files:read')) await denied('scope escalation', new ForbiddenError(shareNeedsRead(principal)));
    const linkEnd = new Date(Date.now() + (expires_in_hours ?? SHARE_DEFAULT_EXPIRES_IN_HOURS) * 3600_000);
    try {
      requireExpiryWithin(await callerExpiresAt(app.db, principal), linkEnd, 'share link');
    } catch (err) {
      await denied('expiry beyond the calling key', err as Error);
    }
    const { link, token } = await app.audit.change(request, (announce) => app.shares.create({
      accountId: principal.accountId, fileId: request.params.id, expiresInHours: expires_in_hours, maxDownloads: max_downloads,
      createdBy: principal.actor,
    }, (fileId, details) => announce({ action: 'file.share', outcome: 'success', resource: { type: 'file', id: fileId }, details })));
    const data = { share_id: link.id, expires_at: link.expires_at, max_downloads: link.max_downloads };
    await app.outbox.emit(principal.accountId, 'file.shared', { id: link.file_id, ...data });
    return reply.code(201).send({ data: { ...link, token, url: shareUrl(token) } });
  });

  app.get('/files/:id/shares', {
    schema: { params: IdParams, querystring: ListShareLinksQuery, response: { 200: Page(ShareLink) } },
    config: { access: { scope: 'files:read' } },
  }, async (request) => {
    return app.shares.listOfFile(principalOf(request).accountId, request.params.id, request.query);
  });

  app.get('/shares', {
    schema: { querystring: ListShareLinksQuery, response: { 200: Page(ShareLink) } },
    config: { access: { scope: 'files:read' } },
  }, async (request) => app.shares.list(principalOf(request).accountId, request.query));

  app.delete('/files/:id/share/:share_id', {
    schema: { params: ShareLinkParams, response: { 200: Envelope(Deleted) } },
    config: { access: { scope: 'files:write' } },
  }, async (request) => {
    const principal = principalOf(request);
    const link = await app.audit.change(request, (announce) => app.shares.revoke(principal.accountId, request.params.id, request.params.share_id, principal.actor, (l) => announce({
      action: 'file.share_revoke', outcome: 'success', resource: { type: 'file', id: String(l.file_id) }, details: { share_id: String(l._id) },
    })));
    return { data: { id: String(link._id), deleted: true as const } };
  });

  // No authentication: the token is the credential. Not counted against the API's per-address
  // budget (`unlimited`) but against a budget of its own, per client address.
  app.get('/files/shared/:token', {
    schema: { params: SharedTokenParams },
    config: { access: { public: true, unlimited: true } },
    onRequest: async (request, reply) => {
      await app.rateLimiter.consume(`share:${request.ip}`, reply, app.config.shareRateLimitPerMinute);
    },
  }, async (request, reply) => downloadShared(request, reply, request.params.token));

  /**
   * Streams the file of a share link. Every GET that sends content (200 or 206) takes one download
   * of the link, in `beforeSend`: after the 304, 416 and missing-content answers (which take none)
   * and before the first byte, so that a download is counted, audited and evented before the
   * client has it. A HEAD takes none. An exhausted link is 410 before anything else, for HEAD and
   * conditional requests too; the claim settles the requests racing past that check.
   */
  async function downloadShared(request: FastifyRequest, reply: FastifyReply, token: string): Promise<FastifyReply> {
    const { link, file } = await app.shares.open(token);
    await app.shares.assertDownloadsLeft(link);
    // The URL is the credential: a page that renders the file must not pass it on as a Referer.
    reply.header('referrer-policy', 'no-referrer');
    const shareId = String(link._id);
    const fileId = String(file._id);
    return sendStoredFile(app, request, reply, file, {
      beforeSend: async (status) => {
        const n = await app.shares.claimDownload(link);
        const seen = { name: file.name, size: file.size, via: 'share_link', share_id: shareId };
        try {
          await app.audit.record({
            accountId: link.account_id, actor: { type: 'share_link', id: shareId }, action: 'file.download', outcome: 'success',
            resource: { type: 'file', id: fileId }, ip: request.ip,
            details: { ...seen, download: n, ...(status === 206 ? { range: request.headers.range } : {}) },
          });
          await app.outbox.emit(link.account_id, 'file.downloaded', { id: fileId, ...seen });
        } catch (err) {
          // Nothing is sent after all: the download is given back (best effort; the error is the answer).
          await app.shares.releaseDownload(link, n)
            .catch((failure: unknown) => request.log.error({ err: failure }, 'could not release a share-link download'));
          throw err;
        }
      },
    });
  }
};

export default shares;
