/** An environment as a plain object (`process.env` fits); only composition roots pass the real one. */
export type Env = Record<string, string | undefined>;

/** What a service definition gets to start or install its server. */
export interface ServiceContext {
  /** A fresh empty directory for this server's data, config and log; removed when it stops. */
  dataDir: string;
  /** Cache for built tools, shared by every run (`$HOME/.cache/xfer` by default). */
  cacheDir: string;
  /** The caller's environment: PATH to find binaries, and the environment of started servers. */
  env: Env;
  log: (msg: string) => void;
}

/** A server a definition started: the process to stop, and the settings tests read. */
export interface StartedService {
  /**
   * Stopped with SIGTERM (SIGKILL after 5 s) unless the definition has its own `stop`. Its command
   * line must name the context's dataDir: that is how a recycled pid is told apart from the server.
   */
  pid: number;
  /** Settings for clients, e.g. `{MONGODB_URI: 'mongodb://127.0.0.1:PORT/'}`; written to `.xfer/services.env`. */
  env: Record<string, string>;
}

/** A running service as recorded in `.xfer/services.json`. */
export interface ServiceRecord extends StartedService {
  name: string;
  dataDir: string;
  startedAt: string;
  /** Started by `services up`: it stays until `services down`, whoever else uses it. */
  pinned: boolean;
  /** Pids of processes (e.g. jest runs) using it; the last one to release an unpinned service stops it. */
  users: number[];
}

/**
 * One kind of real server for tests (one file each, listed in registry.ts). `start` must return
 * only once the server answers, with its process detached so it outlives the caller.
 */
export interface ServiceDefinition {
  name: string;
  summary: string;
  /**
   * Settings this service provides. When all of them are already set in the caller's environment,
   * that external server is used and nothing is started.
   */
  provides: string[];
  /** Installs or builds what `start` needs (CI runs this ahead of the tests); idempotent. */
  install?(ctx: ServiceContext): Promise<void>;
  start(ctx: ServiceContext): Promise<StartedService>;
  /** True when the recorded server still answers; its process is known to be alive. */
  isHealthy(record: ServiceRecord): Promise<boolean>;
  /** Stops the server when a pid alone is not enough (helper processes); must be idempotent. */
  stop?(record: ServiceRecord): Promise<void>;
}
