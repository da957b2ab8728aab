import fp from 'fastify-plugin';
import type { FileStoreConfig } from '../../../../config.js';
import { Loop } from '../../../../lib/loop.js';
import { LocalFileStore } from './local.store.js';
import { S3FileStore } from './s3.store.js';
import type { FileStore } from './types.js';

export { StoredObjectMissingError, type FileStore, type PendingObject } from './types.js';
export { LocalFileStore } from './local.store.js';
export { S3FileStore } from './s3.store.js';

declare module 'fastify' {
  interface FastifyInstance {
    fileStore: FileStore;
  }
}

/** Temporary content older than this was left by an interrupted upload (no upload is pending a day). */
export const TEMP_MAX_AGE_MS = 24 * 60 * 60 * 1000;
export const SWEEP_INTERVAL_MS = 60 * 60 * 1000;

export interface FileStorePluginOptions {
  /** Defaults: TEMP_MAX_AGE_MS and SWEEP_INTERVAL_MS. */
  tempMaxAgeMs?: number;
  sweepIntervalMs?: number;
}

/** The store `config.fileStore` names (not started: `LocalFileStore.start`, `S3FileStore.check`). */
export function createFileStore(config: FileStoreConfig): LocalFileStore | S3FileStore {
  return config.kind === 'local' ? new LocalFileStore(config.dir) : new S3FileStore(config);
}

/**
 * The file store (`app.fileStore`, docs/configuration.md "File store"). A local directory that
 * cannot be created stops the start; an S3 bucket that cannot be reached does not (the store may
 * come back, and every other endpoint works without it): it is logged as an error, and uploads
 * and downloads answer 503 meanwhile. Temporary content that interrupted uploads left is swept
 * at start and every hour; a failing sweep is logged at debug and tried again next time.
 */
export default fp<FileStorePluginOptions>(
  async (app, options) => {
    const tempMaxAgeMs = options.tempMaxAgeMs ?? TEMP_MAX_AGE_MS;
    const store = createFileStore(app.config.fileStore);
    if (store instanceof LocalFileStore) {
      await store.start();
      app.log.info({ dir: store.dir }, 'file store: local directory');
    } else {
      const problem = await store.check();
      if (problem) app.log.error(`file store: ${store.where} is not usable (${problem}); uploads and downloads answer 503 until it is`);
      else app.log.info(`file store: S3 ${store.where}`);
    }
    app.decorate<FileStore>('fileStore', store);

    const sweep = new Loop(
      async () => {
        const removed = await store.sweep(tempMaxAgeMs);
        if (removed > 0) app.log.info({ removed }, 'file store: removed temporary content left by interrupted uploads');
      },
      options.sweepIntervalMs ?? SWEEP_INTERVAL_MS,
      (err) => app.log.debug({ err }, 'file store: sweep of temporary content failed'),
    );
    app.addHook('onReady', async () => sweep.start());
    app.addHook('onClose', async () => {
      await sweep.stop();
      await store.close();
    });
  },
  { name: 'file-store' },
);
