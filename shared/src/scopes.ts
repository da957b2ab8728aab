/**
 * Scope names an API key can carry (api.md "Authentication"), and what each role of a
 * console session is allowed (decisions.md "Accounts, users, sessions, plans").
 */
export const SCOPES = [
  'files:read', 'files:write',
  'transfers:read', 'transfers:write',
  'connections:read', 'connections:write',
  'data-rooms:read', 'data-rooms:write',
  'schedules:read', 'schedules:write',
  'watchers:read', 'watchers:write',
  'workflows:read', 'workflows:write',
  'parameters:read', 'parameters:write',
  'users:read', 'users:write',
  'agents:read', 'agents:write',
  'webhooks:read', 'webhooks:write',
  'activity:read',
  'notifications:read', 'notifications:write',
  'api-keys:read', 'api-keys:write',
] as const;

export type Scope = (typeof SCOPES)[number];

export const ROLES = ['owner', 'admin', 'member', 'viewer'] as const;
export type Role = (typeof ROLES)[number];

export const PLANS = ['free', 'team', 'enterprise'] as const;
export type Plan = (typeof PLANS)[number];

export function isScope(value: string): value is Scope {
  return (SCOPES as readonly string[]).includes(value);
}

/** Scopes a console session of the given role holds. */
export function scopesForRole(role: Role): Scope[] {
  switch (role) {
    case 'owner':
    case 'admin':
      return [...SCOPES];
    case 'member':
      return SCOPES.filter((s) => !s.startsWith('users:') && !s.startsWith('api-keys:'));
    case 'viewer':
      return SCOPES.filter((s) => s.endsWith(':read'));
  }
}

/** True when the plan includes Team features (API key management, webhooks). */
export function planHasTeamFeatures(plan: Plan): boolean {
  return plan === 'team' || plan === 'enterprise';
}
