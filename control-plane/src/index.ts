// The control plane as a library: build the app from a config, bootstrap the first account, and
// start the embedded database (`xfer-server start --local`, `npm start`). Two deliberate subpaths
// carry the rest others reuse: `@xfer/control-plane/process` (the process supervision the
// embedded database runs FerretDB with; e2e's test services start their servers with it) and
// `@xfer/control-plane/clamd` (the scanner's clamd client and the clamd.conf it expects, for
// whoever runs a clamd for it: `npm start` and e2e's clamd service).
export { buildApp, type App, type BuildOptions } from './app.js';
export { DEFAULT_CLAMD, parseConfig, type Config } from './config.js';
export { bootstrapAccount } from './plugins/app/access/bootstrap.js';
export * from './db/index.js';
