export { XferClient, type XferClientOptions, type Health } from './client.js';
export {
  ApiError, TransferFailedError, ExitCode, exitCodeOf, kindOfStatus, type ApiErrorKind, type ApiErrorInit,
} from './errors.js';
export { PageIterator, type PageFetcher } from './paging.js';
export { parseRetryAfter, retryDelayMs, isIdempotent, type BackoffOptions } from './retry.js';
export type { CallOptions, CallSettings, RetryInfo, StreamedResponse, ApiEnvelope, QueryValue } from './transport.js';
export type { Warned } from './resource.js';
export type { ByteRange, Download, DownloadOptions, UploadSource } from './files.js';
export type { AuthApi, ApiKeysApi, UsersApi, SettingsApi, ActivityApi } from './account.js';
export type { ConnectionsApi, AgentsApi } from './infrastructure.js';
export type { TransfersApi } from './transfers.js';
export type { FilesApi, SharesApi } from './files.js';
export type { WebhooksApi } from './webhooks.js';
export type { ParametersApi } from './parameters.js';
export type { SchedulesApi } from './schedules.js';
export type { WatchersApi } from './watchers.js';
export type { WorkflowsApi } from './workflows.js';
export type { DataRoomsApi, RoomUpload } from './data-rooms.js';
export type { NotificationsApi } from './notifications.js';
