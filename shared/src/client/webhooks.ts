import type { Deleted, Page, PageQuery } from '../schemas/common.js';
import type { CreatedWebhook, CreateWebhookRequest, ListWebhooksQuery, UpdateWebhookRequest, Webhook } from '../schemas/webhooks.js';
import type { PageIterator } from './paging.js';
import { Resource, seg, type Warned } from './resource.js';
import type { CallSettings } from './transport.js';

// The delivery shapes are defined by the control plane's route (routes/webhook-deliveries), not
// yet in shared/src/schemas; these interfaces follow them field for field until they move here.

export type WebhookDeliveryStatus = 'pending' | 'delivered' | 'failed' | 'cancelled';

/** One attempt of a delivery; all but `n` and `at` are null while it is in flight. */
export interface WebhookAttempt {
  n: number;
  at: string;
  status_code: number | null;
  duration_ms: number | null;
  error: string | null;
}

/** One event for one webhook, with every attempt made (docs/api.md "Webhook delivery"). */
export interface WebhookDelivery {
  id: string;
  event: string;
  event_id: string;
  status: WebhookDeliveryStatus;
  attempts: number;
  next_attempt_at: string | null;
  created_at: string;
  delivered_at: string | null;
  attempt_log: WebhookAttempt[];
}

/** Answer of `POST /webhooks/:id/test`: 200 whatever the receiver did. */
export interface WebhookTestResult {
  success: boolean;
  status_code: number | null;
  duration_ms: number;
  error: string | null;
  delivery_id: string;
}

export type ListWebhookDeliveriesQuery = PageQuery & { status?: WebhookDeliveryStatus };

/** `/webhooks` (Team plan): signed event notifications. */
export class WebhooksApi extends Resource {
  list(query?: ListWebhooksQuery, s?: CallSettings): Promise<Page<Webhook>> { return this.page('/webhooks', query, s); }
  all(query?: ListWebhooksQuery, s?: CallSettings): PageIterator<Webhook> { return this.pager('/webhooks', query, s); }
  get(id: string, s?: CallSettings): Promise<Webhook> { return this.data('GET', `/webhooks/${seg(id)}`, s); }
  /** Without `secret`, `data.secret` is a generated one shown this once (with `warning`). */
  create(body: CreateWebhookRequest, s?: CallSettings): Promise<Warned<CreatedWebhook>> {
    return this.warned('POST', '/webhooks', { ...s, json: body });
  }
  update(id: string, body: UpdateWebhookRequest, s?: CallSettings): Promise<Webhook> {
    return this.data('PUT', `/webhooks/${seg(id)}`, { ...s, json: body });
  }
  delete(id: string, s?: CallSettings): Promise<Deleted> { return this.remove(`/webhooks/${seg(id)}`, s); }
  /** Sends a `webhook.test` event now, one attempt. */
  test(id: string, s?: CallSettings): Promise<WebhookTestResult> { return this.data('POST', `/webhooks/${seg(id)}/test`, s); }
  deliveries(id: string, query?: ListWebhookDeliveriesQuery, s?: CallSettings): Promise<Page<WebhookDelivery>> {
    return this.page(`/webhooks/${seg(id)}/deliveries`, query, s);
  }
  allDeliveries(id: string, query?: ListWebhookDeliveriesQuery, s?: CallSettings): PageIterator<WebhookDelivery> {
    return this.pager(`/webhooks/${seg(id)}/deliveries`, query, s);
  }
}
