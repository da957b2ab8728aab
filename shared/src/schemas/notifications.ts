import { Type, type Static } from '@sinclair/typebox';
import { PageQuery, StringEnum, Timestamp } from './common.js';

/** How events reach the recipients: one message per event, or (later) one per hour. */
export const NOTIFICATION_DIGESTS = ['none', 'hourly'] as const;
export type NotificationDigest = (typeof NOTIFICATION_DIGESTS)[number];

/** Where a notification stands (docs/api.md "Notifications"). */
export const NOTIFICATION_STATUSES = ['pending', 'sent', 'failed', 'cancelled'] as const;
export type NotificationStatus = (typeof NOTIFICATION_STATUSES)[number];

/** The channels a notification can go out on; email is the only one so far. */
export const NOTIFICATION_CHANNELS = ['email'] as const;
export type NotificationChannel = (typeof NOTIFICATION_CHANNELS)[number];

/** Most recipients of one account's notifications (all of them get one message). */
export const NOTIFICATION_MAX_RECIPIENTS = 50;

const EmailAddress = Type.String({ format: 'email', maxLength: 254 });
const Host = Type.String({ minLength: 1, maxLength: 253 });

/** The SMTP server as every read shows it: the password is write-only (`has_password`). */
export const SmtpServer = Type.Object({
  host: Type.String(),
  port: Type.Integer(),
  /** true: implicit TLS from the first byte (usually port 465); false: STARTTLS, required (usually 587 or 25). */
  secure: Type.Boolean(),
  username: Type.Union([Type.String(), Type.Null()]),
  has_password: Type.Boolean(),
});
export type SmtpServer = Static<typeof SmtpServer>;

/** An account's notification settings (`GET /notifications/settings`); defaults until first set. */
export const NotificationSettings = Type.Object({
  email: Type.Object({
    enabled: Type.Boolean(),
    recipients: Type.Array(Type.String()),
    smtp: Type.Union([SmtpServer, Type.Null()]),
    from: Type.Union([Type.String(), Type.Null()]),
  }),
  /** Event types (api.md "Events") that are sent. */
  events: Type.Array(Type.String()),
  digest: StringEnum(NOTIFICATION_DIGESTS),
  updated_at: Type.Union([Timestamp, Type.Null()]),
});
export type NotificationSettings = Static<typeof NotificationSettings>;

/**
 * `PUT /notifications/settings`: the whole settings. `smtp.password` omitted keeps the stored
 * password, null removes it. With `enabled: true`, `smtp`, `from` and at least one recipient are required.
 */
export const UpdateNotificationSettingsRequest = Type.Object({
  email: Type.Object({
    enabled: Type.Boolean(),
    recipients: Type.Optional(Type.Array(EmailAddress, { maxItems: NOTIFICATION_MAX_RECIPIENTS, uniqueItems: true })),
    smtp: Type.Optional(Type.Union([Type.Object({
      host: Host,
      port: Type.Integer({ minimum: 1, maximum: 65535 }),
      secure: Type.Boolean(),
      username: Type.Optional(Type.Union([Type.String({ minLength: 1, maxLength: 256 }), Type.Null()])),
      password: Type.Optional(Type.Union([Type.String({ minLength: 1, maxLength: 1024 }), Type.Null()])),
    }, { additionalProperties: false }), Type.Null()])),
    from: Type.Optional(Type.Union([EmailAddress, Type.Null()])),
  }, { additionalProperties: false }),
  events: Type.Array(Type.String({ minLength: 1, maxLength: 64 }), { maxItems: 64, uniqueItems: true }),
  digest: Type.Optional(StringEnum(NOTIFICATION_DIGESTS)),
}, { additionalProperties: false });
export type UpdateNotificationSettingsRequest = Static<typeof UpdateNotificationSettingsRequest>;

/** One notification: an event (or a test) sent, or being sent, to the recipients. */
export const NotificationLogEntry = Type.Object({
  id: Type.String(),
  event: Type.String(),
  channel: StringEnum(NOTIFICATION_CHANNELS),
  recipients: Type.Array(Type.String()),
  status: StringEnum(NOTIFICATION_STATUSES),
  /** The last failed attempt's reason (SMTP reply or connection error; never a credential). */
  error: Type.Union([Type.String(), Type.Null()]),
  attempts: Type.Integer({ minimum: 0 }),
  created_at: Timestamp,
  sent_at: Type.Union([Timestamp, Type.Null()]),
});
export type NotificationLogEntry = Static<typeof NotificationLogEntry>;

export const ListNotificationLogQuery = Type.Composite([
  PageQuery,
  Type.Object({ status: Type.Optional(StringEnum(NOTIFICATION_STATUSES)) }),
], { additionalProperties: false });
export type ListNotificationLogQuery = Static<typeof ListNotificationLogQuery>;

/** Answer of `POST /notifications/test`: 200 whatever the outcome. */
export const NotificationTestResult = Type.Object({
  success: Type.Boolean(),
  error: Type.Union([Type.String(), Type.Null()]),
  log_id: Type.String(),
});
export type NotificationTestResult = Static<typeof NotificationTestResult>;
