// The embedded database, and the process helpers the test services (e2e) reuse to run their servers.
export { startEmbeddedMongo, defaultCacheDir, type EmbeddedMongo, type EmbeddedMongoOptions } from './embedded-mongo.js';
export { ensureFerretdbBinary, cachedFerretdbPath, FERRETDB_VERSION, type EnsureFerretdbOptions } from './ferretdb-build.js';
export { acceptsTcp, commandLine, findExecutable, freeLoopbackPort, isAlive, startServerProcess, stopPid, tailFile, waitForTcp, type ChildEnv, type StartServerOptions, type StartedServerProcess } from './process.js';
