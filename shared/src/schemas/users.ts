import { Type, type Static } from '@sinclair/typebox';
import { ROLES } from '../scopes.js';
import { Id, Name, StringEnum, Timestamp } from './common.js';

export const RoleName = StringEnum(ROLES);

export const User = Type.Object({
  id: Id,
  email: Type.String(),
  name: Type.String(),
  role: RoleName,
  created_at: Timestamp,
  last_login_at: Type.Union([Timestamp, Type.Null()]),
});
export type User = Static<typeof User>;

export const CreateUserRequest = Type.Object(
  {
    email: Type.String({ format: 'email', maxLength: 320 }),
    name: Type.Optional(Name),
    role: RoleName,
    password: Type.String({ minLength: 12, maxLength: 1024 }),
  },
  { additionalProperties: false },
);
export type CreateUserRequest = Static<typeof CreateUserRequest>;

export const UpdateUserRequest = Type.Object(
  { name: Type.Optional(Name), role: Type.Optional(RoleName), password: Type.Optional(Type.String({ minLength: 12, maxLength: 1024 })) },
  { additionalProperties: false, minProperties: 1 },
);
export type UpdateUserRequest = Static<typeof UpdateUserRequest>;
