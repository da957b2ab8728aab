import { Type, type Static } from '@sinclair/typebox';
import { Id, Name, StringEnum, Timestamp } from './common.js';
import { PLANS } from '../scopes.js';
import { OtpCode } from './auth.js';

/**
 * Console-only settings under /settings/* (decisions.md "Accounts, users, sessions, plans").
 * Per-user settings belong to the signed-in user; account settings are read by every role and
 * changed by owners and admins only. `updated_at` is null while a setting still has its default.
 */

/** Bounds of the retention policy, in days. */
export const RETENTION_LIMITS = {
  audit_days: { min: 30, max: 3650, default: 365 },
  deleted_files_days: { min: 1, max: 3650, default: 30 },
} as const;

const UpdatedAt = Type.Union([Timestamp, Type.Null()]);

/**
 * GET /settings/mfa (per user): `enabled` once a TOTP authenticator is confirmed (login then needs
 * its code); `pending` while an enrolment awaits its first code.
 */
export const MfaSetting = Type.Object({ enabled: Type.Boolean(), pending: Type.Boolean() });
export type MfaSetting = Static<typeof MfaSetting>;

/**
 * PUT /settings/mfa. `{enabled: true}` starts an enrolment (answers `MfaEnrolment`);
 * `{enabled: false, code}` turns MFA off, `code` being a current code of the active
 * authenticator (an enrolment still pending is cancelled without one).
 */
export const UpdateMfaRequest = Type.Object({ enabled: Type.Boolean(), code: Type.Optional(OtpCode) }, { additionalProperties: false });
export type UpdateMfaRequest = Static<typeof UpdateMfaRequest>;

/**
 * Answer of PUT /settings/mfa `{enabled: true}`: the new secret, shown this once, as base32 and as
 * the `otpauth://` URL that authenticator apps scan. MFA is on after POST /settings/mfa/verify.
 */
export const MfaEnrolment = Type.Object({
  enabled: Type.Literal(false),
  pending: Type.Literal(true),
  secret: Type.String(),
  otpauth_url: Type.String(),
});
export type MfaEnrolment = Static<typeof MfaEnrolment>;

/** POST /settings/mfa/verify: a code of the pending secret, which turns MFA on. */
export const VerifyMfaRequest = Type.Object({ code: OtpCode }, { additionalProperties: false });
export type VerifyMfaRequest = Static<typeof VerifyMfaRequest>;

/** Errors of the MFA settings that clients match on. */
export const MfaMessages = {
  codeInvalid: 'code is not valid',
  codeRequired: 'code is required to turn MFA off',
  alreadyEnabled: 'MFA is already on: turn it off before enrolling another authenticator',
  nothingPending: 'No MFA enrolment is pending: start one with PUT /settings/mfa {"enabled": true}',
} as const;

/** GET /settings/sessions (per user): sessions issued before `sessions_valid_after` are refused. */
export const SessionsSetting = Type.Object({
  sessions_valid_after: UpdatedAt,
  session_ttl_seconds: Type.Integer(),
  /** When the session making this call expires. */
  current_session_expires_at: UpdatedAt,
});
export type SessionsSetting = Static<typeof SessionsSetting>;

/** DELETE /settings/sessions ("sign out everywhere"): the user's id, like every DELETE, and the new cut-off. */
export const SessionsRevoked = Type.Object({ id: Id, deleted: Type.Literal(true), sessions_valid_after: Timestamp });
export type SessionsRevoked = Static<typeof SessionsRevoked>;

/** GET /settings/avatar (per user). */
export const AvatarSetting = Type.Object({ url: Type.Union([Type.String(), Type.Null()]), updated_at: UpdatedAt });
export type AvatarSetting = Static<typeof AvatarSetting>;

export const UpdateAvatarRequest = Type.Object(
  { url: Type.Union([Type.String({ format: 'uri', pattern: '^https://', maxLength: 2048 }), Type.Null()]) },
  { additionalProperties: false },
);
export type UpdateAvatarRequest = Static<typeof UpdateAvatarRequest>;

/** GET /settings/retention (account): how long audit records and deleted files are kept. */
export const RetentionSetting = Type.Object({
  audit_days: Type.Integer(),
  deleted_files_days: Type.Integer(),
  updated_at: UpdatedAt,
});
export type RetentionSetting = Static<typeof RetentionSetting>;

/** PUT /settings/retention: only the given fields change. */
export const UpdateRetentionRequest = Type.Object(
  {
    audit_days: Type.Optional(Type.Integer({ minimum: RETENTION_LIMITS.audit_days.min, maximum: RETENTION_LIMITS.audit_days.max })),
    deleted_files_days: Type.Optional(
      Type.Integer({ minimum: RETENTION_LIMITS.deleted_files_days.min, maximum: RETENTION_LIMITS.deleted_files_days.max }),
    ),
  },
  { additionalProperties: false, minProperties: 1 },
);
export type UpdateRetentionRequest = Static<typeof UpdateRetentionRequest>;

/** A registered service principal (an identity-provider application): names and ids, never secrets. */
export const ServicePrincipal = Type.Object(
  { name: Name, client_id: Type.String({ minLength: 1, maxLength: 200, pattern: '^\\S+$' }) },
  { additionalProperties: false },
);
export type ServicePrincipal = Static<typeof ServicePrincipal>;

/** GET /settings/service-principals (account). */
export const ServicePrincipalsSetting = Type.Object({ service_principals: Type.Array(ServicePrincipal), updated_at: UpdatedAt });
export type ServicePrincipalsSetting = Static<typeof ServicePrincipalsSetting>;

/** PUT /settings/service-principals: replaces the whole list; names and client ids are unique. */
export const UpdateServicePrincipalsRequest = Type.Object(
  { service_principals: Type.Array(ServicePrincipal, { maxItems: 100 }) },
  { additionalProperties: false },
);
export type UpdateServicePrincipalsRequest = Static<typeof UpdateServicePrincipalsRequest>;

/** GET /settings/test-status: whether the account's control plane and its database answer. */
export const TestStatus = Type.Object({
  status: Type.Union([Type.Literal('ok'), Type.Literal('degraded')]),
  database: Type.Union([Type.Literal('ok'), Type.Literal('unavailable')]),
  database_latency_ms: Type.Union([Type.Integer(), Type.Null()]),
  checked_at: Timestamp,
});
export type TestStatus = Static<typeof TestStatus>;

/** GET /settings/plan (account): its plan, and when it last changed (null: as bootstrapped). */
export const PlanSetting = Type.Object({ plan: StringEnum(PLANS), updated_at: UpdatedAt });
export type PlanSetting = Static<typeof PlanSetting>;

/**
 * PUT /settings/plan (an owner's session): the account's new plan, in force from the next request
 * (docs/api.md "Console-only settings"). Going to `free` is refused while the account has API keys
 * (besides the bootstrap key) or webhooks, which need the Team plan.
 */
export const UpdatePlanRequest = Type.Object({ plan: StringEnum(PLANS) }, { additionalProperties: false });
export type UpdatePlanRequest = Static<typeof UpdatePlanRequest>;
