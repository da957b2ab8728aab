/**
 * Error messages that are part of the contract (api.md, decisions.md). Clients and tests
 * match on these exact strings, so they live in one place.
 */
export const Messages = {
  unauthenticated: 'Invalid or expired credentials',
  missingScope: 'API key missing required scope',
  scopeEscalation: 'Cannot grant scopes the calling key does not hold',
  planRequired: 'This feature requires the Team plan or higher',
  consoleOnly: 'This setting is available to console sessions only',
  rateLimited: 'Rate limit exceeded, retry later',
  databaseUnavailable: 'Database unavailable, retry later',
  queryTooSlow: 'The query took longer than the database allows one page and was stopped; narrow it (for files: a folder, a type or a size range)',
  internal: 'Internal server error',
  apiKeyWarning: 'Store this key now: it cannot be shown again.',
  webhookSecretWarning: 'Store this signing secret now: it cannot be shown again.',
} as const;
