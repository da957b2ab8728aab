import type { FastifyPluginAsync } from 'fastify';
import userSettings from './user-settings.js';
import mfaSettings from './mfa-settings.js';
import accountSettings from './account-settings.js';

/**
 * Console-only settings under /settings/* (decisions.md "Accounts, users, sessions, plans"):
 * every route declares `consoleOnly`, so an API key gets 403 `This setting is available to
 * console sessions only` from the auth hook before any handler runs. Every change writes a
 * `setting.update` audit record.
 */
const settings: FastifyPluginAsync = async (app) => {
  await app.register(userSettings);
  await app.register(mfaSettings);
  await app.register(accountSettings);
};

export default settings;
