import { Type, type Static } from '@sinclair/typebox';
import { Envelope, Id, PageQuery, StringEnum, Timestamp } from './common.js';

/** Every event type of api.md "Events": what a webhook may subscribe to. */
export const WEBHOOK_EVENT_TYPES = [
  'file.uploaded', 'file.downloaded', 'file.deleted', 'file.shared', 'file.scan_blocked',
  'transfer.started', 'transfer.completed', 'transfer.failed',
  'data_room.created', 'data_room.file_added', 'data_room.member_added',
  'user.login', 'user.registered',
  'workflow.notify', 'workflow.completed', 'workflow.failed',
] as const;
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];

export function isWebhookEventType(value: string): value is WebhookEventType {
  return (WEBHOOK_EVENT_TYPES as readonly string[]).includes(value);
}

/** Prefix of generated signing secrets (decisions.md "Webhooks"). */
export const WEBHOOK_SECRET_PREFIX = 'whsec_';
/** Bounds of a caller-given signing secret (docs/api.md "Webhooks"). */
export const WEBHOOK_SECRET_MIN_LENGTH = 16;
export const WEBHOOK_SECRET_MAX_LENGTH = 256;
/** Visible ASCII only, so the HMAC key bytes never depend on an encoding. */
export const WEBHOOK_SECRET_PATTERN = /^[\x21-\x7e]+$/;

/** A webhook as every read shows it: the signing secret never appears. */
export const Webhook = Type.Object({
  id: Id,
  url: Type.String(),
  events: Type.Array(Type.String()),
  active: Type.Boolean(),
  created_at: Timestamp,
  updated_at: Timestamp,
});
export type Webhook = Static<typeof Webhook>;

/** Answer of a create: `secret` only when the service generated it (shown this once). */
export const CreatedWebhook = Type.Intersect([Webhook, Type.Object({ secret: Type.Optional(Type.String()) })]);
export type CreatedWebhook = Static<typeof CreatedWebhook>;

/** `{data, warning?}`: the warning accompanies a generated secret (Messages.webhookSecretWarning). */
export const CreateWebhookResponse = Type.Intersect([Envelope(CreatedWebhook), Type.Object({ warning: Type.Optional(Type.String()) })]);
export type CreateWebhookResponse = Static<typeof CreateWebhookResponse>;

export const ListWebhooksQuery = Type.Composite([PageQuery], { additionalProperties: false });
export type ListWebhooksQuery = Static<typeof ListWebhooksQuery>;

const Url = Type.String({ minLength: 1, maxLength: 2048 });
const Events = Type.Array(Type.String({ minLength: 1, maxLength: 64 }), { minItems: 1, maxItems: 64, uniqueItems: true });
const Secret = Type.String({ minLength: WEBHOOK_SECRET_MIN_LENGTH, maxLength: WEBHOOK_SECRET_MAX_LENGTH });

export const CreateWebhookRequest = Type.Object(
  { url: Url, events: Events, secret: Type.Optional(Secret) },
  { additionalProperties: false },
);
export type CreateWebhookRequest = Static<typeof CreateWebhookRequest>;

/** Any of the fields; a given `secret` replaces the signing secret (rotation) and is not echoed. */
export const UpdateWebhookRequest = Type.Object(
  { url: Type.Optional(Url), events: Type.Optional(Events), active: Type.Optional(Type.Boolean()), secret: Type.Optional(Secret) },
  { additionalProperties: false },
);
export type UpdateWebhookRequest = Static<typeof UpdateWebhookRequest>;

/** Where a delivery stands (docs/api.md "Webhook delivery"). */
export const WEBHOOK_DELIVERY_STATUSES = ['pending', 'delivered', 'failed', 'cancelled'] as const;
export type WebhookDeliveryStatus = (typeof WEBHOOK_DELIVERY_STATUSES)[number];

/** One attempt of a delivery; all but `n` and `at` are null while it is in flight. */
export const WebhookAttempt = Type.Object({
  n: Type.Integer({ minimum: 1 }),
  at: Timestamp,
  status_code: Type.Union([Type.Integer(), Type.Null()]),
  duration_ms: Type.Union([Type.Integer(), Type.Null()]),
  error: Type.Union([Type.String(), Type.Null()]),
});
export type WebhookAttempt = Static<typeof WebhookAttempt>;

/** One event for one webhook, with every attempt made. */
export const WebhookDelivery = Type.Object({
  id: Id,
  event: Type.String(),
  event_id: Id,
  status: StringEnum(WEBHOOK_DELIVERY_STATUSES),
  /** Attempts made so far. */
  attempts: Type.Integer({ minimum: 0 }),
  next_attempt_at: Type.Union([Timestamp, Type.Null()]),
  created_at: Timestamp,
  delivered_at: Type.Union([Timestamp, Type.Null()]),
  /** Every attempt, oldest first. */
  attempt_log: Type.Array(WebhookAttempt),
});
export type WebhookDelivery = Static<typeof WebhookDelivery>;

export const ListWebhookDeliveriesQuery = Type.Composite(
  [PageQuery, Type.Object({ status: Type.Optional(StringEnum(WEBHOOK_DELIVERY_STATUSES)) })],
  { additionalProperties: false },
);
export type ListWebhookDeliveriesQuery = Static<typeof ListWebhookDeliveriesQuery>;

/** Answer of `POST /webhooks/:id/test`: 200 whatever the receiver did. */
export const WebhookTestResult = Type.Object({
  success: Type.Boolean(),
  status_code: Type.Union([Type.Integer(), Type.Null()]),
  duration_ms: Type.Integer(),
  error: Type.Union([Type.String(), Type.Null()]),
  delivery_id: Id,
});
export type WebhookTestResult = Static<typeof WebhookTestResult>;
