import { Types } from 'mongoose';
import {
  isWebhookEventType, WEBHOOK_SECRET_PATTERN, WEBHOOK_SECRET_PREFIX,
  type CreateWebhookRequest, type UpdateWebhookRequest, type Webhook,
} from '@xfer/shared';
import type { Models } from '../../../models/index.js';
import type { WebhookDoc } from '../../../models/webhook.model.js';
import type { Sealed, Vault } from '../../../lib/vault.js';
import { boundTo } from '../../../lib/sealed-fields.js';
import { randomToken } from '../../../lib/crypto.js';
import { toObjectId } from '../../../lib/pagination.js';
import { resolveSafeTarget, UnsafeUrlError, type AddressPolicy, type Lookup } from '../../../lib/ssrf-guard.js';
import { BadRequestError, NotFoundError } from '../../../errors.js';

type StoredWebhook = WebhookDoc & { _id: Types.ObjectId };
type AccountId = string | Types.ObjectId;

/** What the webhook routes need, passed in so the service reads no globals. */
export interface WebhookDeps {
  db: Models;
  vault: Vault;
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

/**
 * The URL as it will be stored: WHATWG-normalized, exactly the form the guard checked (so the
 * deliverer never parses a different string than the one that was judged). 400 `url <reason>`.
 */
async function checkedUrl(deps: WebhookDeps, url: string): Promise<URL> {
  try {
    return (await resolveSafeTarget(url, deps.policy, deps.lookup)).url;
  } catch (err) {
    if (err instanceof UnsafeUrlError) throw new BadRequestError(`url ${err.message}`);
    throw err;
  }
}

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
export function auditDetails(webhook: Webhook): Record<string, unknown> {
  return { origin: new URL(webhook.url).origin, events: webhook.events, active: webhook.active };
}

/** Called with what the audit record names after the checks, right before the write (plugins/app/audit.ts `change`). */
export type BeforeWrite = (id: string, details: Record<string, unknown>) => Promise<void>;
const noAnnouncement: BeforeWrite = async () => {};

/** Creates a webhook; `secret` is returned only when it was generated here. */
export async function createWebhook(
  deps: WebhookDeps, accountId: AccountId, input: CreateWebhookRequest, beforeWrite: BeforeWrite = noAnnouncement,
): Promise<{ webhook: Webhook; generatedSecret: string | null }> {
  checkEvents(input.events);
  checkSecret(input.secret);
  const url = await checkedUrl(deps, input.url);
  const secret = input.secret ?? newSecret();
  // The id is chosen here so that the secret is sealed bound to it.
  const owner = { _id: new Types.ObjectId(), account_id: accountId };
  await beforeWrite(String(owner._id), {
    origin: url.origin, events: input.events, active: true, secret_source: input.secret === undefined ? 'generated' : 'given',
  });
  const doc = await deps.db.webhooks.create({
    ...owner,
    url: url.href,
    events: input.events,
    secret: deps.vault.seal(secret, boundTo('webhook.secret', owner)),
    active: true,
  });
  return { webhook: presentWebhook(doc.toObject() as StoredWebhook), generatedSecret: input.secret === undefined ? secret : null };
}

/** The caller's webhook, or 404 for unknown, malformed and other accounts' ids alike. */
export async function getWebhook(db: Models, accountId: AccountId, id: string): Promise<Webhook> {
  const _id = toObjectId(id);
  const doc = _id && await db.webhooks.findOne({ _id, account_id: accountId }).lean();
  if (!doc) throw webhookNotFound(id);
  return presentWebhook(doc as StoredWebhook);
}

/**
 * Changes the given fields; a new `url` is checked again, a new `secret` replaces the signing
 * secret for every later delivery attempt. Returns the names of the fields given, for the audit.
 */
export async function updateWebhook(
  deps: WebhookDeps, accountId: AccountId, id: string, input: UpdateWebhookRequest, beforeWrite: BeforeWrite = noAnnouncement,
): Promise<{ webhook: Webhook; changed: string[] }> {
  const changed = Object.keys(input).sort();
  if (changed.length === 0) throw new BadRequestError('body must contain at least one of url, events, active, secret');
  const _id = toObjectId(id);
  // Existence first, so another account's id is 404 before its URL would be resolved.
  const current = _id && await deps.db.webhooks.findOne({ _id, account_id: accountId }).lean();
  if (!_id || !current) throw webhookNotFound(id);
  if (input.events !== undefined) checkEvents(input.events);
  checkSecret(input.secret);
  const set: Record<string, unknown> = { updated_at: new Date() };
  if (input.url !== undefined) set.url = (await checkedUrl(deps, input.url)).href;
  if (input.events !== undefined) set.events = input.events;
  if (input.active !== undefined) set.active = input.active;
  if (input.secret !== undefined) set.secret = deps.vault.seal(input.secret, boundTo('webhook.secret', { _id, account_id: accountId }));
  await beforeWrite(id, {
    origin: new URL((set.url as string | undefined) ?? current.url).origin, events: input.events ?? current.events, active: input.active ?? current.active, changed,
  });
  const updated = await deps.db.webhooks.findOneAndUpdate({ _id, account_id: accountId }, { $set: set }, { new: true }).lean();
  if (!updated) throw webhookNotFound(id);
  return { webhook: presentWebhook(updated as StoredWebhook), changed };
}

/** Deletes permanently; returns what the audit record names. */
export async function deleteWebhook(db: Models, accountId: AccountId, id: string, beforeWrite: BeforeWrite = noAnnouncement): Promise<Webhook> {
  const _id = toObjectId(id);
  const doc = _id && await db.webhooks.findOne({ _id, account_id: accountId }).lean();
  if (!doc) throw webhookNotFound(id);
  const webhook = presentWebhook(doc as StoredWebhook);
  await beforeWrite(webhook.id, auditDetails(webhook));
  if ((await db.webhooks.deleteOne({ _id: doc._id, account_id: doc.account_id })).deletedCount !== 1) throw webhookNotFound(id);
  return webhook;
}
