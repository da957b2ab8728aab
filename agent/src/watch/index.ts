/**
 * Watching a folder (docs/agent.md "Watching a folder"). `FolderWatch` is the poller of one
 * watcher and speaks no protocol: given a `WatchSpec` (and how to read its first listing), each
 * `poll` lists the folder through a connector and hands over the new stable `FileVersion`s.
 * `WatchRunner` is what the agent drives: it applies the control plane's `watch.set`, polls each
 * watcher on its interval through the agent's connectors, and reports `watch.found` and
 * `watch.polled`.
 */
export { FolderWatch, checkWatchSpec, checkFirstListing, WatchSpecError, MAX_STABLE_SECONDS } from './folder-watch.js';
export type { WatchSpec, FirstListing, FileVersion, PollOptions, PollSummary } from './folder-watch.js';
export { versionIdentity } from './identity.js';
export { WatchRunner, DEFAULT_MAX_CONCURRENT_POLLS } from './watch-runner.js';
export type { WatchRunnerOptions, WatchSet } from './watch-runner.js';
