import type { ApiKey } from '@xfer/shared';
import type { Column } from '../output.js';

export const apiKeyColumns: Column<ApiKey>[] = [
  { header: 'id', get: (k) => k.id },
  { header: 'name', get: (k) => k.name },
  { header: 'key_prefix', get: (k) => k.key_prefix },
  { header: 'scopes', get: (k) => k.scopes.join(',') },
  { header: 'expires_at', get: (k) => k.expires_at },
  { header: 'last_used_at', get: (k) => k.last_used_at },
  { header: 'service_principal', get: (k) => k.service_principal },
];
