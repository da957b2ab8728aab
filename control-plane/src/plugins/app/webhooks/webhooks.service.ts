import { Types } from 'mongoose';
import {
  isWebhookEventType, WEBHOOK_SECRET_PATTERN, WEBHOOK_SECRET_PREFIX,
  type CreateWebhookRequest, type ListWebhookDeliveriesQuery, type Page, type PageQuery, type UpdateWebhookRequest, type Webhook,
  type WebhookAttempt, type WebhookDelivery,
} from '@xfer/shared';
import type { Models } from '../../../models/index.js';
import type { WebhookDoc } from '../../../models/webhook.model.js';
import type { WebhookAttemptDoc, WebhookDeliveryDoc } from '../../../models/webhook-delivery.model.js';
import type { Sealed, Vault } from '../../../lib/vault.js';
import { boundTo } from '../../../lib/sealed-fields.js';
import { randomToken } from '../../../lib/crypto.js';
import { paginate, toObjectId } from '../../../lib/pagination.js';
import { resolveSafeTarget, UnsafeUrlError, type AddressPolicy, type Lookup } from '../../../lib/ssrf-guard.js';
import { BadRequestError, NotFoundError } from '../../../errors.js';

type Stored<T> = T & { _id: Types.ObjectId };
type StoredWebhook = Stored<WebhookDoc>;
type AccountId = string | Types.ObjectId;

/** What the webhooks service needs, passed in so that it reads no globals. */
export interface WebhooksServiceOptions {
  db: Models;
  vault: Vault;
  /** The addresses a webhook URL may resolve to (config.webhooks.unsafeAllowedAddresses). */
  policy: AddressPolicy;
  /** Defaults to the system resolver (ssrf-guard). */
  lookup?: Lookup;
}

/** The one read shape of a webhook: never the secret. */
export function presentWebhook(doc: StoredWebhook): Webhook {
  return {
    id: String(doc._id),
    url: doc.url,
    events: [...doc.events],
    active: doc.active,
    created_at: doc.created_at.toISOString(),
    updated_at: doc.updated_at.toISOString(),
  };
}

function presentAttempt(a: Stored<WebhookAttemptDoc>): WebhookAttempt {
  return { n: a.n, at: a.started_at.toISOString(), status_code: a.status_code ?? null, duration_ms: a.duration_ms ?? null, error: a.error ?? null };
}

function presentDelivery(d: Stored<WebhookDeliveryDoc>, attempts: Array<Stored<WebhookAttemptDoc>>): WebhookDelivery {
  return {
    id: String(d._id),
    event: d.event,
    event_id: String(d.event_id),
    status: d.status,
    attempts: attempts.length,
    // While an attempt is in flight this holds its lease end, which is not a scheduled attempt.
    next_attempt_at: d.status === 'pending' && d.next_attempt_at && !attempts.some((a) => !a.finished_at)
      ? d.next_attempt_at.toISOString()
      : null,
    created_at: d.created_at.toISOString(),
    delivered_at: d.delivered_at ? d.delivered_at.toISOString() : null,
    attempt_log: attempts.map(presentAttempt),
  };
}

/**
 * The signing secret of a stored webhook, for the deliverer only: never put it in a response,
 * log line or audit record. It is sealed as a JSON string (`vault.seal(secret)`).
 */
export function openWebhookSecret(vault: Vault, doc: Pick<WebhookDoc, 'secret' | 'account_id'> & { _id: unknown }): string {
  return vault.open<string>(doc.secret as Sealed, boundTo('webhook.secret', doc));
}

/** `whsec_` + 32 random bytes, base64url (decisions.md "Webhooks"). */
function newSecret(): string {
  return `${WEBHOOK_SECRET_PREFIX}${randomToken(32)}`;
}

const webhookNotFound = (id: string) => new NotFoundError(`Webhook ${id} not found`);

function checkEvents(events: readonly string[]): void {
  const unknown = events.filter((e) => !isWebhookEventType(e));
  if (unknown.length > 0) throw new BadRequestError(`events contains unknown event type: ${unknown.join(', ')}`);
}

function checkSecret(secret: string | undefined): void {
  if (secret !== undefined && !WEBHOOK_SECRET_PATTERN.test(secret)) {
    throw new BadRequestError('secret must be visible ASCII characters only (no spaces or control characters)');
  }
}

/** What an audit record may say about a webhook: the origin of its URL (paths and queries may carry tokens), never the secret. */
function auditDetails(webhook: Webhook): Record<string, unknown> {
  return { origin: new URL(webhook.url).origin, events: webhook.events, active: webhook.active };
}

/** Called with what the audit record names after the checks, right before the write (plugins/app/access/audit.service.ts `change`). */
export type BeforeWrite = (id: string, details: Record<string, unknown>) => Promise<void>;
const noAnnouncement: BeforeWrite = async () => {};

/**
 * An account's webhooks and their deliveries (`app.webhooks`; docs/api.md "Webhooks"). Every
 * query is scoped to the account: an unknown id, a malformed one and another account's are the
 * same 404. The signing secret never leaves it except through `openSecret`, for the deliverer.
 */
export class WebhooksService {
  private readonly db: Models;
  private readonly vault: Vault;
  private readonly policy: AddressPolicy;
  private readonly lookup: Lookup | undefined;

  constructor(options: WebhooksServiceOptions) {
    this.db = options.db;
    this.vault = options.vault;
    this.policy = options.policy;
    this.lookup = options.lookup;
  }

  /** The signing secret of `doc` (openWebhookSecret with this service's vault). */
  openSecret(doc: Pick<WebhookDoc, 'secret' | 'account_id'> & { _id: unknown }): string {
    return openWebhookSecret(this.vault, doc);
  }

  /** A page of the account's webhooks. */
  list(accountId: AccountId, query: PageQuery): Promise<Page<Webhook>> {
    return paginate(this.db.webhooks, { account_id: accountId }, query, presentWebhook);
  }

  /** Creates a webhook; `secret` is returned only when it was generated here. */
  async create(
    accountId: AccountId, input: CreateWebhookRequest, beforeWrite: BeforeWrite = noAnnouncement,
  ): Promise<{ webhook: Webhook; generatedSecret: string | null }> {
    checkEvents(input.events);
    checkSecret(input.secret);
    const url = await this.checkedUrl(input.url);
    const secret = input.secret ?? newSecret();
    // The id is chosen here so that the secret is sealed bound to it.
    const owner = { _id: new Types.ObjectId(), account_id: accountId };
    await beforeWrite(String(owner._id), {
      origin: url.origin, events: input.events, active: true, secret_source: input.secret === undefined ? 'generated' : 'given',
    });
    const doc = await this.db.webhooks.create({
      ...owner,
      url: url.href,
      events: input.events,
      secret: this.vault.seal(secret, boundTo('webhook.secret', owner)),
      active: true,
    });
    return { webhook: presentWebhook(doc.toObject() as StoredWebhook), generatedSecret: input.secret === undefined ? secret : null };
  }

  /** The caller's webhook, or 404 for unknown, malformed and other accounts' ids alike. */
  async get(accountId: AccountId, id: string): Promise<Webhook> {
    const _id = toObjectId(id);
    const doc = _id && await this.db.webhooks.findOne({ _id, account_id: accountId }).lean();
    if (!doc) throw webhookNotFound(id);
    return presentWebhook(doc as StoredWebhook);
  }

  /**
   * Changes the given fields; a new `url` is checked again, a new `secret` replaces the signing
   * secret for every later delivery attempt. Returns the names of the fields given, for the audit.
   */
  async update(
    accountId: AccountId, id: string, input: UpdateWebhookRequest, beforeWrite: BeforeWrite = noAnnouncement,
  ): Promise<{ webhook: Webhook; changed: string[] }> {
    const changed = Object.keys(input).sort();
    if (changed.length === 0) throw new BadRequestError('body must contain at least one of url, events, active, secret');
    const _id = toObjectId(id);
    // Existence first, so another account's id is 404 before its URL would be resolved.
    const current = _id && await this.db.webhooks.findOne({ _id, account_id: accountId }).lean();
    if (!_id || !current) throw webhookNotFound(id);
    if (input.events !== undefined) checkEvents(input.events);
    checkSecret(input.secret);
    const set: Record<string, unknown> = { updated_at: new Date() };
    if (input.url !== undefined) set.url = (await this.checkedUrl(input.url)).href;
    if (input.events !== undefined) set.events = input.events;
    if (input.active !== undefined) set.active = input.active;
    if (input.secret !== undefined) set.secret = this.vault.seal(input.secret, boundTo('webhook.secret', { _id, account_id: accountId }));
    await beforeWrite(id, {
      origin: new URL((set.url as string | undefined) ?? current.url).origin, events: input.events ?? current.events, active: input.active ?? current.active, changed,
    });
    const updated = await this.db.webhooks.findOneAndUpdate({ _id, account_id: accountId }, { $set: set }, { new: true }).lean();
    if (!updated) throw webhookNotFound(id);
    return { webhook: presentWebhook(updated as StoredWebhook), changed };
  }

  /** Deletes permanently; returns what the audit record names. */
  async delete(accountId: AccountId, id: string, beforeWrite: BeforeWrite = noAnnouncement): Promise<Webhook> {
    const _id = toObjectId(id);
    const doc = _id && await this.db.webhooks.findOne({ _id, account_id: accountId }).lean();
    if (!doc) throw webhookNotFound(id);
    const webhook = presentWebhook(doc as StoredWebhook);
    await beforeWrite(webhook.id, auditDetails(webhook));
    if ((await this.db.webhooks.deleteOne({ _id: doc._id, account_id: doc.account_id })).deletedCount !== 1) throw webhookNotFound(id);
    return webhook;
  }

  /** The id of the account's webhook `id` (an existence check, nothing read), or 404. */
  async ownId(accountId: AccountId, id: string): Promise<Types.ObjectId> {
    const objectId = toObjectId(id);
    const found = objectId && await this.db.webhooks.exists({ _id: objectId, account_id: accountId });
    if (!objectId || !found) throw webhookNotFound(id);
    return objectId;
  }

  /** A page of the deliveries of the account's webhook `id` (404 when it has none such), each with its attempts. */
  async listDeliveries(accountId: AccountId, id: string, query: ListWebhookDeliveriesQuery): Promise<Page<WebhookDelivery>> {
    const webhookId = await this.ownId(accountId, id);
    const { status, ...page } = query;
    const filter = { account_id: accountId, webhook_id: webhookId, ...(status ? { status } : {}) };
    const listed = await paginate(this.db.webhookDeliveries, filter, page, (d) => d);
    const attempts = await this.db.webhookAttempts
      .find({ account_id: accountId, delivery_id: { $in: listed.data.map((d) => d._id) } })
      .sort({ delivery_id: 1, n: 1 }).lean();
    const byDelivery = new Map<string, typeof attempts>();
    for (const a of attempts) {
      const key = String(a.delivery_id);
      byDelivery.set(key, [...(byDelivery.get(key) ?? []), a]);
    }
    return { data: listed.data.map((d) => presentDelivery(d, byDelivery.get(String(d._id)) ?? [])), next_cursor: listed.next_cursor };
  }

  /**
   * The URL as it will be stored: WHATWG-normalized, exactly the form the guard checked (so the
   * deliverer never parses a different string than the one that was judged). 400 `url <reason>`.
   */
  private async checkedUrl(url: string): Promise<URL> {
    try {
      return (await resolveSafeTarget(url, this.policy, this.lookup)).url;
    } catch (err) {
      if (err instanceof UnsafeUrlError) throw new BadRequestError(`url ${err.message}`);
      throw err;
    }
  }
}
