import type { FastifyPluginAsync } from 'fastify';
import health from './health/index.js';
import auth from './auth/index.js';
import apiKeys from './api-keys/index.js';

/** Every resource, one folder each, mounted under /api/v1. */
const routes: FastifyPluginAsync = async (app) => {
  await app.register(health);
  await app.register(auth);
  await app.register(apiKeys);
};

export default routes;
