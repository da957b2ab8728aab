/**
 * Watching a folder (docs/agent.md "Watching a folder"): what the session will drive when the
 * control plane assigns watchers to this agent. Nothing here speaks the protocol; the caller
 * turns a watcher's settings into a `WatchSpec`, calls `poll` on its schedule with the connector
 * of the watcher's connection, and forwards each reported `FileVersion`.
 */
export { FolderWatch, checkWatchSpec, checkFirstListing, WatchSpecError, MAX_STABLE_SECONDS } from './folder-watch.js';
export type { WatchSpec, FirstListing, FileVersion, PollOptions, PollSummary } from './folder-watch.js';
export { versionIdentity } from './identity.js';
