import { Args } from '@oclif/core';
import { ROLES, type Role, type User } from '@xfer/shared';
import type { Column } from '../output.js';

export const userColumns: Column<User>[] = [
  { header: 'id', get: (u) => u.id },
  { header: 'email', get: (u) => u.email },
  { header: 'name', get: (u) => u.name },
  { header: 'role', get: (u) => u.role },
  { header: 'created_at', get: (u) => u.created_at },
  { header: 'last_login_at', get: (u) => u.last_login_at },
];

export const userIdArg = { id: Args.string({ description: 'User id', required: true }) };

/** Options of the --role flag (create requires it, update does not). */
export const roleFlagOptions = { description: 'Role: only an owner may grant owner', options: [...ROLES] };
export const asRole = (role: string | undefined) => role as Role | undefined;

export const passwordStdinDescription = 'Read the password from stdin (never give it as a flag value: shell history, ps)';
