import { ActivityApi, ApiKeysApi, AuthApi, SettingsApi, UsersApi } from './account.js';
import { FilesApi, SharesApi } from './files.js';
import { AgentsApi, ConnectionsApi } from './infrastructure.js';
import { ParametersApi } from './parameters.js';
import { DataRoomsApi } from './data-rooms.js';
import { DEFAULT_BACKOFF, type BackoffOptions } from './retry.js';
import { TransfersApi } from './transfers.js';
import { Transport, type CallOptions, type CallSettings, type RetryInfo } from './transport.js';
import { WebhooksApi } from './webhooks.js';
import { SchedulesApi } from './schedules.js';
import { WatchersApi } from './watchers.js';
import { WorkflowsApi } from './workflows.js';
import { NotificationsApi } from './notifications.js';

export interface XferClientOptions {
  /** The API root up to and including `/api/v1`, e.g. `https://xfer.example.com/api/v1`. */
  baseUrl: string;
  /** An API key (`svc_…`) or a session token; omitted for login and public share downloads. */
  token?: string;
  /**
   * Limit per attempt, default 60 s: until the answer for JSON calls; for streamed uploads and
   * downloads, the longest silence (they may take hours while bytes keep flowing). 0: none.
   */
  timeoutMs?: number;
  /** Further attempts after a 429, 503 or transient network failure; default 4. */
  retries?: number;
  backoff?: BackoffOptions;
  /** Default: Node's global `fetch`. */
  fetch?: typeof fetch;
  /** Default `xfer-client`. */
  userAgent?: string;
  /** Called before each wait for another attempt. */
  onRetry?: (info: RetryInfo) => void;
}

/** `GET /health`: answered without authentication; 503 (`unavailable`) when the database is down. */
export interface Health {
  status: 'ok';
}

/**
 * The typed client of the xfer REST API (`/api/v1`), one group per resource. Methods resolve with
 * the answer's `data` (lists: one page `{data, next_cursor}`, or every item with `all()`), and
 * reject with `ApiError` (see `kind` and `exitCodeOf`) or, for a failed transfer,
 * `TransferFailedError`. 429 and 503 are retried honouring `Retry-After`; network failures and
 * timeouts only for GET, HEAD, PUT and DELETE; a streamed upload never. Every method takes
 * `{signal, timeoutMs}` last.
 */
export class XferClient {
  readonly auth: AuthApi;
  readonly apiKeys: ApiKeysApi;
  readonly users: UsersApi;
  readonly settings: SettingsApi;
  readonly activity: ActivityApi;
  readonly connections: ConnectionsApi;
  readonly agents: AgentsApi;
  readonly transfers: TransfersApi;
  readonly files: FilesApi;
  readonly shares: SharesApi;
  readonly webhooks: WebhooksApi;
  readonly parameters: ParametersApi;
  readonly schedules: SchedulesApi;
  readonly watchers: WatchersApi;
  readonly workflows: WorkflowsApi;
  readonly dataRooms: DataRoomsApi;
  readonly notifications: NotificationsApi;
  private readonly transport: Transport;

  constructor(options: XferClientOptions) {
    const t = new Transport({
      baseUrl: options.baseUrl,
      token: options.token,
      timeoutMs: options.timeoutMs ?? 60_000,
      retries: options.retries ?? 4,
      backoff: { ...DEFAULT_BACKOFF, ...options.backoff },
      fetch: options.fetch ?? globalThis.fetch,
      userAgent: options.userAgent ?? 'xfer-client',
      onRetry: options.onRetry,
    });
    this.transport = t;
    this.auth = new AuthApi(t);
    this.apiKeys = new ApiKeysApi(t);
    this.users = new UsersApi(t);
    this.settings = new SettingsApi(t);
    this.activity = new ActivityApi(t);
    this.connections = new ConnectionsApi(t);
    this.agents = new AgentsApi(t);
    this.transfers = new TransfersApi(t);
    this.files = new FilesApi(t);
    this.shares = new SharesApi(t);
    this.webhooks = new WebhooksApi(t);
    this.parameters = new ParametersApi(t);
    this.schedules = new SchedulesApi(t);
    this.watchers = new WatchersApi(t);
    this.workflows = new WorkflowsApi(t);
    this.dataRooms = new DataRoomsApi(t);
    this.notifications = new NotificationsApi(t);
  }

  /** The API root this client talks to, without a trailing slash. */
  get baseUrl(): string {
    return this.transport.baseUrl;
  }

  /** `GET /health`, the bare `{status: "ok"}`. */
  health(s?: CallSettings): Promise<Health> {
    return this.transport.json<Health>('GET', '/health', { ...s, auth: false });
  }

  /** Any call by method and path (under `/api/v1`), answering the parsed JSON body as is. */
  request<T>(method: string, path: string, options?: CallOptions): Promise<T> {
    return this.transport.json<T>(method, path, options);
  }
}
