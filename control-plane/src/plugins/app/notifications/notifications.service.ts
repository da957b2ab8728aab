import { Types } from 'mongoose';
import {
  isWebhookEventType,
  type ListNotificationLogQuery, type NotificationLogEntry, type NotificationSettings, type Page, type UpdateNotificationSettingsRequest,
} from '@xfer/shared';
import type { Models } from '../../../models/index.js';
import type { NotificationSettingsDoc } from '../../../models/notification-settings.model.js';
import type { NotificationDeliveryDoc } from '../../../models/notification-delivery.model.js';
import type { Sealed, Vault } from '../../../lib/vault.js';
import { boundTo } from '../../../lib/sealed-fields.js';
import { paginate } from '../../../lib/pagination.js';
import { resolveSafeHost, UnsafeUrlError, type AddressPolicy, type Lookup } from '../../../lib/ssrf-guard.js';
import { isDuplicateKey } from '../../../lib/duplicate-key.js';
import { BadRequestError } from '../../../errors.js';
import type { SmtpTarget } from './mailer.js';

type AccountId = string | Types.ObjectId;
/** The stored settings of an account. */
export type StoredNotificationSettings = NotificationSettingsDoc & { _id: Types.ObjectId };
type StoredDelivery = NotificationDeliveryDoc & { _id: Types.ObjectId };

/** Called with what the audit record names after the checks, right before the write. */
export type BeforeWrite = (details: Record<string, unknown>) => Promise<void>;

/** What the service needs, passed in so that it reads no globals. */
export interface NotificationsServiceOptions {
  db: Models;
  vault: Vault;
  /** The addresses an SMTP server may be at (config.notifications.unsafeAllowedAddresses). */
  policy: AddressPolicy;
  lookup?: Lookup;
}

/** A host name (letters, digits, hyphens, dots) or an IP literal; anything else is refused before resolving. */
const HOST_NAME = /^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?$/;
const IPV6_LITERAL = /^\[?[0-9A-Fa-f:.]+\]?$/;

/** The one read shape: never the password. */
export function presentSettings(doc: StoredNotificationSettings | null): NotificationSettings {
  return {
    email: {
      enabled: doc?.enabled ?? false,
      recipients: [...(doc?.recipients ?? [])],
      smtp: doc?.smtp_host
        ? { host: doc.smtp_host, port: doc.smtp_port ?? 587, secure: doc.smtp_secure ?? false, username: doc.smtp_username ?? null, has_password: doc.smtp_password != null }
        : null,
      from: doc?.from ?? null,
    },
    events: [...(doc?.events ?? [])],
    digest: (doc?.digest as NotificationSettings['digest'] | undefined) ?? 'none',
    updated_at: doc ? doc.updated_at.toISOString() : null,
  };
}

/** The one read shape of a log entry. */
export function presentLogEntry(d: StoredDelivery): NotificationLogEntry {
  return {
    id: String(d._id),
    event: d.event,
    channel: d.channel as NotificationLogEntry['channel'],
    recipients: [...d.recipients],
    status: d.status as NotificationLogEntry['status'],
    error: d.error ?? null,
    attempts: d.attempts,
    created_at: d.created_at.toISOString(),
    sent_at: d.sent_at ? d.sent_at.toISOString() : null,
  };
}

/**
 * An account's notification settings and log (`app.notifications`; docs/api.md "Notifications").
 * Every query is scoped to the account. The SMTP password leaves it only through `smtpOf`, for
 * the deliverer's attempt.
 */
export class NotificationsService {
  constructor(private readonly o: NotificationsServiceOptions) {}

  /** The stored settings of the account, or null before the first PUT. */
  stored(accountId: AccountId): Promise<StoredNotificationSettings | null> {
    return this.o.db.notificationSettings.findOne({ account_id: accountId }).lean<StoredNotificationSettings>().exec();
  }

  /** What `GET /notifications/settings` answers (defaults before the first PUT). */
  async get(accountId: AccountId): Promise<NotificationSettings> {
    return presentSettings(await this.stored(accountId));
  }

  /**
   * Replaces the settings (docs/api.md "Notifications"): 400 naming the field for an unknown event,
   * an enabled email without server, sender or recipient,
   * a refused SMTP host, a password without a username, or a new host, port, TLS mode or username
   * with a stored password but no password given (a stored password is never sent to a server it was
   * not given for).
   */
  async put(accountId: AccountId, input: UpdateNotificationSettingsRequest, beforeWrite: BeforeWrite): Promise<NotificationSettings> {
    const unknown = input.events.filter((e) => !isWebhookEventType(e));
    if (unknown.length > 0) throw new BadRequestError(`events contains unknown event type: ${unknown.join(', ')}`);
    const { email } = input;
    const recipients = email.recipients ?? [];
    const smtp = email.smtp ?? null;
    if (email.enabled) {
      if (!smtp) throw new BadRequestError('email.smtp is required when email.enabled is true');
      if (!email.from) throw new BadRequestError('email.from is required when email.enabled is true');
      if (recipients.length === 0) throw new BadRequestError('email.recipients must name at least one address when email.enabled is true');
    }
    const current = await this.stored(accountId);
    const _id = current?._id ?? new Types.ObjectId();
    let host: string | null = null;
    let password: Sealed | null = null;
    let passwordChange: 'set' | 'kept' | 'removed' | 'none' = 'none';
    if (smtp) {
      host = await this.checkedHost(smtp.host);
      const username = smtp.username ?? null;
      if (smtp.password && !username) throw new BadRequestError('email.smtp.password needs email.smtp.username');
      if (smtp.password) {
        password = this.o.vault.seal(smtp.password, boundTo('notification.smtp_password', { _id, account_id: accountId }));
        passwordChange = 'set';
      } else if (smtp.password === undefined && current?.smtp_password && username) {
        // Bound like a connection's credentials (docs/security.md "Credential binding"): another
        // port on the same host can be another listener, and `secure: false` sends the AUTH
        // exchange after STARTTLS where `true` sent it inside implicit TLS; either is a new server.
        const moved = (['host', 'port', 'secure', 'username'] as const).filter((field) => ({
          host: current.smtp_host !== host, port: current.smtp_port !== smtp.port, secure: (current.smtp_secure ?? false) !== smtp.secure, username: current.smtp_username !== username,
        })[field]);
        if (moved.length > 0) {
          throw new BadRequestError(`email.smtp.password must be given again when ${moved.map((f) => `email.smtp.${f}`).join(', ')} changes`);
        }
        password = current.smtp_password as Sealed;
        passwordChange = 'kept';
      } else if (current?.smtp_password) passwordChange = 'removed';
    } else if (current?.smtp_password) passwordChange = 'removed';
    const doc = {
      enabled: email.enabled,
      recipients,
      from: email.from ?? null,
      smtp_host: host,
      smtp_port: smtp?.port ?? null,
      smtp_secure: smtp?.secure ?? false,
      smtp_username: smtp?.username ?? null,
      smtp_password: password,
      events: input.events,
      digest: input.digest ?? 'none',
      updated_at: new Date(),
    };
    await beforeWrite({
      enabled: doc.enabled, recipients: recipients.length, smtp: host ? { host, port: doc.smtp_port, secure: doc.smtp_secure } : null,
      events: doc.events, digest: doc.digest, password: passwordChange,
    });
    // One document per account (unique account_id): of two first PUTs at once, the loser meets
    // the index and runs again as an update (its password sealed again, bound to the winner's id).
    let saved: StoredNotificationSettings | null;
    try {
      saved = await this.o.db.notificationSettings
        .findOneAndUpdate({ account_id: accountId }, { $set: doc, $setOnInsert: { _id, account_id: new Types.ObjectId(String(accountId)) } }, { upsert: true, new: true })
        .lean<StoredNotificationSettings>();
    } catch (err) {
      if (!current && isDuplicateKey(err)) return this.put(accountId, input, async () => {});
      throw err;
    }
    return presentSettings(saved);
  }

  /** The SMTP server of `doc` with its password opened: for an attempt only, never a response or log line. */
  smtpOf(doc: StoredNotificationSettings): SmtpTarget | null {
    if (!doc.smtp_host || !doc.smtp_port) return null;
    const password = doc.smtp_password ? this.o.vault.open<string>(doc.smtp_password as Sealed, boundTo('notification.smtp_password', doc)) : null;
    return { host: doc.smtp_host, port: doc.smtp_port, secure: doc.smtp_secure ?? false, username: doc.smtp_username ?? null, password };
  }

  /** A page of the account's notifications, newest first. */
  log(accountId: AccountId, query: ListNotificationLogQuery): Promise<Page<NotificationLogEntry>> {
    const { status, ...page } = query;
    return paginate(this.o.db.notificationDeliveries, { account_id: accountId, ...(status ? { status } : {}) }, page, (d) => presentLogEntry(d as StoredDelivery));
  }

  /**
   * The host as stored, checked against private networks like a webhook URL; 400 `email.smtp.host …`.
   * Normalized by the WHATWG URL parser first, as a webhook URL's host is: every IPv4 spelling
   * (`0x7f000001`, `127.1`) becomes dotted decimal, so the guard judges the address it names.
   */
  private async checkedHost(host: string): Promise<string> {
    if (!HOST_NAME.test(host) && !IPV6_LITERAL.test(host)) throw new BadRequestError('email.smtp.host must be a host name or an IP address');
    let normalized: string;
    try {
      normalized = new URL(`https://${host.includes(':') && !host.startsWith('[') ? `[${host}]` : host}/`).hostname;
    } catch {
      throw new BadRequestError('email.smtp.host must be a host name or an IP address');
    }
    try {
      return (await resolveSafeHost(normalized, this.o.policy, this.o.lookup)).host;
    } catch (err) {
      if (err instanceof UnsafeUrlError) throw new BadRequestError(`email.smtp.host ${err.message.replace(/^host /, '')}`);
      throw err;
    }
  }
}
