import type { Deleted, Page } from '../schemas/common.js';
import type {
  CreatedWebhook, CreateWebhookRequest, ListWebhookDeliveriesQuery, ListWebhooksQuery, UpdateWebhookRequest, Webhook, WebhookDelivery, WebhookTestResult,
} from '../schemas/webhooks.js';
import type { PageIterator } from './paging.js';
import { Resource, seg, type Warned } from './resource.js';
import type { CallSettings } from './transport.js';

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
