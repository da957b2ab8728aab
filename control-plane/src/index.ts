export { buildApp, type App, type BuildOptions } from './app.js';
export { parseConfig, type Config } from './config.js';
export { bootstrapAccount } from './plugins/app/access/bootstrap.js';
export * from './db/index.js';
// The clamd client and clamd.conf text, shared with the clamd test service (e2e) and `npm start`.
export { CLAMD_MAX_SCAN_BYTES, clamdConf, clamdPing, instream, type ClamdAddress, type ClamdConfOptions } from './lib/clamd.js';
