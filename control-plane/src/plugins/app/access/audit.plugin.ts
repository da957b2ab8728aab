import fp from 'fastify-plugin';
import { ChainWriter } from '../../../lib/audit-chain.js';
import { systemKeyOf } from '../../../lib/system-keys.js';
import { AuditService } from './audit.service.js';

declare module 'fastify' {
  interface FastifyInstance {
    audit: AuditService;
  }
}

/** The audit trail (audit.service.ts), keyed by the installation's audit key (lib/system-keys.ts). */
export default fp(
  async (app) => {
    const chain = new ChainWriter(app.db.auditEvents.collection, await systemKeyOf(app.db, app.vault, 'audit'));
    app.decorate('audit', new AuditService({ chain, log: app.log }));
  },
  { name: 'audit', dependencies: ['mongoose'] },
);
