import type { Page } from '../schemas/common.js';
import type {
  ListNotificationLogQuery, NotificationLogEntry, NotificationSettings, NotificationTestResult, UpdateNotificationSettingsRequest,
} from '../schemas/notifications.js';
import type { PageIterator } from './paging.js';
import { Resource } from './resource.js';
import type { CallSettings } from './transport.js';

/** `/notifications`: email notifications of events over the account's SMTP server. */
export class NotificationsApi extends Resource {
  /** The settings; the SMTP password is never returned (`smtp.has_password`). */
  settings(s?: CallSettings): Promise<NotificationSettings> { return this.data('GET', '/notifications/settings', s); }
  /** Replaces the settings; `smtp.password` omitted keeps the stored one, null removes it. */
  updateSettings(body: UpdateNotificationSettingsRequest, s?: CallSettings): Promise<NotificationSettings> {
    return this.data('PUT', '/notifications/settings', { ...s, json: body });
  }
  /** Sends a test message now, one attempt: `success` and the SMTP error. */
  test(s?: CallSettings): Promise<NotificationTestResult> { return this.data('POST', '/notifications/test', s); }
  /** A page of the log, newest first. */
  log(query?: ListNotificationLogQuery, s?: CallSettings): Promise<Page<NotificationLogEntry>> { return this.page('/notifications/log', query, s); }
  allLog(query?: ListNotificationLogQuery, s?: CallSettings): PageIterator<NotificationLogEntry> { return this.pager('/notifications/log', query, s); }
}
