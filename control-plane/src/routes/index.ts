import type { FastifyPluginAsync } from 'fastify';
import health from './health/index.js';
import auth from './auth/index.js';
import apiKeys from './api-keys/index.js';
import users from './users/index.js';
import settings from './settings/index.js';
import activity from './activity/index.js';
import connections from './connections/index.js';
import agents from './agents/index.js';
import transfers from './transfers/index.js';
import files from './files/index.js';
import shares from './shares/index.js';
import webhooks from './webhooks/index.js';
import webhookDeliveries from './webhook-deliveries/index.js';
import parameters from './parameters/index.js';
import schedules from './schedules/index.js';
import watchers from './watchers/index.js';
import workflows from './workflows/index.js';
import dataRooms from './data-rooms/index.js';
import rooms from './rooms/index.js';
import notifications from './notifications/index.js';

/** Every resource, one folder each, mounted under /api/v1. */
const routes: FastifyPluginAsync = async (app) => {
  await app.register(health);
  await app.register(auth);
  await app.register(apiKeys);
  await app.register(users);
  await app.register(settings);
  await app.register(activity);
  await app.register(connections);
  await app.register(agents);
  await app.register(transfers);
  await app.register(files);
  await app.register(shares);
  await app.register(webhooks);
  await app.register(webhookDeliveries);
  await app.register(parameters);
  await app.register(schedules);
  await app.register(watchers);
  await app.register(workflows);
  await app.register(dataRooms);
  await app.register(rooms);
  await app.register(notifications);
};

export default routes;
