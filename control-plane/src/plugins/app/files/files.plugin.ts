import fp from 'fastify-plugin';
import { FilesService } from './files.service.js';
import { measured } from './scanner.js';

declare module 'fastify' {
  interface FastifyInstance {
    files: FilesService;
  }
}

/** Decorates `app.files` (files.service.ts) over the file store, the scanner (each upload's scan measured) and the outbox. */
export default fp(
  async (app) => {
    app.decorate('files', new FilesService({
      db: app.db, store: app.fileStore, scanner: measured(app.scanner, app.metrics), outbox: app.outbox, uploadMaxBytes: app.config.uploadMaxBytes, log: app.log,
    }));
  },
  { name: 'files', dependencies: ['mongoose', 'file-store', 'scanner', 'outbox', 'metrics'] },
);
