import { Type, type Static } from '@sinclair/typebox';
import { Timestamp } from './common.js';

/** A TOTP code as authenticator apps show it (RFC 6238, 6 digits). */
export const OtpCode = Type.String({ pattern: '^[0-9]{6}$' });
export type OtpCode = Static<typeof OtpCode>;

/**
 * POST /auth/login. `otp` is needed once the user has turned MFA on (PUT /settings/mfa); it is
 * ignored for users without MFA, so a console may always send it.
 */
export const LoginRequest = Type.Object(
  {
    email: Type.String({ minLength: 3, maxLength: 320 }),
    password: Type.String({ minLength: 1, maxLength: 1024 }),
    otp: Type.Optional(OtpCode),
  },
  { additionalProperties: false },
);
export type LoginRequest = Static<typeof LoginRequest>;

export const Session = Type.Object({ token: Type.String(), expires_at: Timestamp });
export type Session = Static<typeof Session>;

/** Login errors beyond `Messages.unauthenticated` that clients match on. */
export const LoginMessages = {
  /** 401 after a correct password when MFA is on and no `otp` was sent: the console asks for one. */
  otpRequired: 'One-time code required',
} as const;
