import fp from 'fastify-plugin';
import storePlugin from './store/index.js';
import scannerPlugin from './scanner.js';
import filesPlugin from './files.plugin.js';
import sharesPlugin from './shares.plugin.js';

export type { FileStore } from './store/index.js';
export type { Scanner } from './scanner.js';
export type { FilesService } from './files.service.js';
export type { SharesService } from './shares.service.js';

/**
 * The files domain: the file store (`app.fileStore`, store/), the malware scanner
 * (`app.scanner`, scanner.ts), the files service (`app.files`: records and the upload's
 * scan-then-commit flow) and the share links of those files (`app.shares`). Its events go
 * through the webhooks domain's outbox, registered before it.
 */
export default fp(
  async (app) => {
    await app.register(storePlugin);
    await app.register(scannerPlugin);
    await app.register(filesPlugin);
    await app.register(sharesPlugin);
  },
  { name: 'files-domain', dependencies: ['mongoose', 'outbox'] },
);
