import type { SealBinding } from './vault.js';

/**
 * Every place a sealed value is kept: what `xfer-server rotate-keys` walks, and the purposes
 * values are bound to (lib/vault.ts). A value that moves between two fields of one record
 * (an MFA enrolment becoming the active secret) has one purpose for both.
 */
export const SEALED_FIELDS = [
  { model: 'connections', field: 'credentials', purpose: 'connection.credentials' },
  { model: 'webhooks', field: 'secret', purpose: 'webhook.secret' },
  { model: 'users', field: 'mfa_secret', purpose: 'user.mfa' },
  { model: 'users', field: 'mfa_pending_secret', purpose: 'user.mfa' },
  { model: 'systemKeys', field: 'key', purpose: 'system.key' },
  { model: 'parameters', field: 'secret_value', purpose: 'parameter.value' },
  { model: 'notificationSettings', field: 'smtp_password', purpose: 'notification.smtp_password' },
] as const;

export type SealPurpose = (typeof SEALED_FIELDS)[number]['purpose'];

/** The binding of a value kept in the record `doc` (its `_id` and `account_id`). */
export function boundTo(purpose: SealPurpose, doc: { _id?: unknown; account_id?: unknown }): SealBinding {
  if (doc._id == null || doc.account_id == null) throw new Error(`a sealed ${purpose} value needs its record's _id and account_id`);
  return { purpose, accountId: String(doc.account_id), recordId: String(doc._id) };
}
