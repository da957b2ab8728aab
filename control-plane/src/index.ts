export { buildApp, type App, type BuildOptions } from './app.js';
export { parseConfig, type Config } from './config.js';
export { bootstrapAccount } from './lib/bootstrap.js';
export * from './db/index.js';
