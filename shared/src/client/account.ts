import type { ActivityQuery, ActivitySummary, ActivitySummaryQuery, AuditEvent } from '../schemas/activity.js';
import type { ApiKey, CreateApiKeyRequest, CreatedApiKey, ListApiKeysQuery } from '../schemas/api-keys.js';
import type { LoginRequest, Session } from '../schemas/auth.js';
import type { Deleted, PageQuery, Page } from '../schemas/common.js';
import type {
  AvatarSetting, MfaEnrolment, MfaSetting, PlanSetting, RetentionSetting, UpdatePlanRequest, ServicePrincipalsSetting, SessionsRevoked, SessionsSetting,
  TestStatus, UpdateAvatarRequest, UpdateMfaRequest, UpdateRetentionRequest, UpdateServicePrincipalsRequest, VerifyMfaRequest,
} from '../schemas/settings.js';
import type { CreateUserRequest, UpdateUserRequest, User } from '../schemas/users.js';
import type { PageIterator } from './paging.js';
import { Resource, seg, type ListQuery, type Warned } from './resource.js';
import type { CallSettings, QueryValue } from './transport.js';

/** `POST /auth/login`: a session token (JWT) for email and password. */
export class AuthApi extends Resource {
  /** 401 `Invalid or expired credentials` for any failure; `otp` once the user has MFA on. */
  login(body: LoginRequest, s?: CallSettings): Promise<Session> {
    return this.data('POST', '/auth/login', { ...s, json: body });
  }
}

/** `/api-keys` (Team plan): the full key is shown once, by `create`. */
export class ApiKeysApi extends Resource {
  /** `service_principal`: only the keys issued for that registered principal. */
  list(query?: ListApiKeysQuery, s?: CallSettings): Promise<Page<ApiKey>> { return this.page('/api-keys', query, s); }
  all(query?: ListApiKeysQuery, s?: CallSettings): PageIterator<ApiKey> { return this.pager('/api-keys', query, s); }
  /** `data.key` is the only copy of the key; `warning` says so. */
  create(body: CreateApiKeyRequest, s?: CallSettings): Promise<Warned<CreatedApiKey>> {
    return this.warned('POST', '/api-keys', { ...s, json: body });
  }
  /** Revoked at once: later calls with the key answer 401. */
  revoke(id: string, s?: CallSettings): Promise<Deleted> { return this.remove(`/api-keys/${seg(id)}`, s); }
}

/** `/users` of the caller's account. */
export class UsersApi extends Resource {
  list(query?: PageQuery, s?: CallSettings): Promise<Page<User>> { return this.page('/users', query, s); }
  all(query?: PageQuery, s?: CallSettings): PageIterator<User> { return this.pager('/users', query, s); }
  get(id: string, s?: CallSettings): Promise<User> { return this.data('GET', `/users/${seg(id)}`, s); }
  create(body: CreateUserRequest, s?: CallSettings): Promise<User> { return this.data('POST', '/users', { ...s, json: body }); }
  update(id: string, body: UpdateUserRequest, s?: CallSettings): Promise<User> {
    return this.data('PUT', `/users/${seg(id)}`, { ...s, json: body });
  }
  delete(id: string, s?: CallSettings): Promise<Deleted> { return this.remove(`/users/${seg(id)}`, s); }
}

/** `/settings/*`: console sessions only (an API key gets 403). */
export class SettingsApi extends Resource {
  getMfa(s?: CallSettings): Promise<MfaSetting> { return this.data('GET', '/settings/mfa', s); }
  /** `{enabled: true}` answers the enrolment (secret shown once); `{enabled: false, code}` turns MFA off. */
  updateMfa(body: UpdateMfaRequest, s?: CallSettings): Promise<MfaSetting | MfaEnrolment> {
    return this.data('PUT', '/settings/mfa', { ...s, json: body });
  }
  verifyMfa(body: VerifyMfaRequest, s?: CallSettings): Promise<MfaSetting> {
    return this.data('POST', '/settings/mfa/verify', { ...s, json: body });
  }
  getSessions(s?: CallSettings): Promise<SessionsSetting> { return this.data('GET', '/settings/sessions', s); }
  /** Sign out everywhere, this session included. */
  revokeSessions(s?: CallSettings): Promise<SessionsRevoked> { return this.data('DELETE', '/settings/sessions', s); }
  loginEvents(query?: PageQuery, s?: CallSettings): Promise<Page<AuditEvent>> { return this.page('/settings/login-events', query, s); }
  allLoginEvents(query?: PageQuery, s?: CallSettings): PageIterator<AuditEvent> { return this.pager('/settings/login-events', query, s); }
  getAvatar(s?: CallSettings): Promise<AvatarSetting> { return this.data('GET', '/settings/avatar', s); }
  updateAvatar(body: UpdateAvatarRequest, s?: CallSettings): Promise<AvatarSetting> {
    return this.data('PUT', '/settings/avatar', { ...s, json: body });
  }
  getRetention(s?: CallSettings): Promise<RetentionSetting> { return this.data('GET', '/settings/retention', s); }
  updateRetention(body: UpdateRetentionRequest, s?: CallSettings): Promise<RetentionSetting> {
    return this.data('PUT', '/settings/retention', { ...s, json: body });
  }
  getServicePrincipals(s?: CallSettings): Promise<ServicePrincipalsSetting> { return this.data('GET', '/settings/service-principals', s); }
  updateServicePrincipals(body: UpdateServicePrincipalsRequest, s?: CallSettings): Promise<ServicePrincipalsSetting> {
    return this.data('PUT', '/settings/service-principals', { ...s, json: body });
  }
  testStatus(s?: CallSettings): Promise<TestStatus> { return this.data('GET', '/settings/test-status', s); }
  getPlan(s?: CallSettings): Promise<PlanSetting> { return this.data('GET', '/settings/plan', s); }
  /** An owner's session only; in force from the next request. */
  updatePlan(body: UpdatePlanRequest, s?: CallSettings): Promise<PlanSetting> {
    return this.data('PUT', '/settings/plan', { ...s, json: body });
  }
}

/** `GET /activity`: the audit trail of the caller's account, newest first. */
export class ActivityApi extends Resource {
  list(query?: ListQuery<ActivityQuery>, s?: CallSettings): Promise<Page<AuditEvent>> { return this.page('/activity', query, s); }
  all(query?: ListQuery<ActivityQuery>, s?: CallSettings): PageIterator<AuditEvent> { return this.pager('/activity', query, s); }
  /** `GET /activity/summary`: the dashboard counters over `[from, to)` (default: the last 24 hours). */
  summary(query?: ActivitySummaryQuery, s?: CallSettings): Promise<ActivitySummary> {
    return this.data('GET', '/activity/summary', { ...s, query: { ...query } as Record<string, QueryValue> });
  }
}
