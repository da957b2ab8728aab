import { Args } from '@oclif/core';
import type { ShareLink } from '@xfer/shared';
import type { Column } from '../output.js';

export const shareColumns: Column<ShareLink>[] = [
  { header: 'id', get: (s) => s.id },
  { header: 'file_id', get: (s) => s.file_id },
  { header: 'status', get: (s) => s.status },
  { header: 'downloads', get: (s) => `${s.downloads}/${s.max_downloads ?? '∞'}` },
  { header: 'expires', get: (s) => s.expires_at },
  { header: 'created', get: (s) => s.created_at },
];

export const fileIdArg = { 'file-id': Args.string({ description: 'Id of the shared file', required: true }) };
