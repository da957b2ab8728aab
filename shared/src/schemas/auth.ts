import { Type, type Static } from '@sinclair/typebox';
import { Timestamp } from './common.js';

export const LoginRequest = Type.Object(
  { email: Type.String({ minLength: 3, maxLength: 320 }), password: Type.String({ minLength: 1, maxLength: 1024 }) },
  { additionalProperties: false },
);
export type LoginRequest = Static<typeof LoginRequest>;

export const Session = Type.Object({ token: Type.String(), expires_at: Timestamp });
export type Session = Static<typeof Session>;
