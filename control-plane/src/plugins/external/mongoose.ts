import fp from 'fastify-plugin';
import mongoose, { type Connection } from 'mongoose';
import { createIndexes, registerModels, type Models } from '../../models/index.js';

declare module 'fastify' {
  interface FastifyInstance {
    db: Models;
    dbConnection: Connection;
  }
}

export interface MongoosePluginOptions {
  uri: string;
  databaseName: string;
  timeoutMs: number;
}

/**
 * One mongoose connection per app. Commands are not buffered: while the database is down an
 * operation fails after `timeoutMs` (answered 503 by the error handler) instead of queueing,
 * and the driver reconnects by itself when the server returns.
 */
export default fp<MongoosePluginOptions>(
  async (app, opts) => {
    const conn = mongoose.createConnection(opts.uri, {
      dbName: opts.databaseName,
      bufferCommands: false,
      autoIndex: false,
      autoCreate: false,
      serverSelectionTimeoutMS: opts.timeoutMs,
      connectTimeoutMS: opts.timeoutMs,
      socketTimeoutMS: 60_000,
    });
    await conn.asPromise();
    const models = registerModels(conn);
    await createIndexes(models);
    app.decorate('db', models);
    app.decorate('dbConnection', conn);
    app.addHook('onClose', async () => {
      await conn.close();
    });
  },
  { name: 'mongoose' },
);
