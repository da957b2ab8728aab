// The embedded database (FerretDB, or mongod when installed). Its process supervision
// (process.ts) is the package's `./process` subpath, not part of this entry.
export { startEmbeddedMongo, defaultCacheDir, type EmbeddedMongo, type EmbeddedMongoOptions } from './embedded-mongo.js';
