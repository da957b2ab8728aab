import type { Types } from 'mongoose';
import { MfaMessages, type MfaEnrolment, type MfaSetting } from '@xfer/shared';
import type { Models } from '../../../models/index.js';
import type { UserDoc } from '../../../models/user.model.js';
import type { Sealed, Vault } from '../../../lib/vault.js';
import { boundTo } from '../../../lib/sealed-fields.js';
import { base32Decode, base32Encode, generateTotpSecret, otpauthUrl, verifyTotp } from '../../../lib/totp.js';
import { BadRequestError, ConflictError, NotFoundError } from '../../../errors.js';
import type { AuditBy, AuditService } from './audit.service.js';
import { settingEntry } from './settings.service.js';
import { isDuplicateKey } from '../../../lib/duplicate-key.js';

/** Issuer shown by authenticator apps beside the account. */
export const MFA_ISSUER = 'xfer';

/** Why a code was refused: goes to the audit record, never the code itself. */
export type CodeRefusal = 'wrong code' | 'code replayed' | 'code missing';

/** A refused code on a settings route: 400, with the reason for the audit record. */
export class MfaCodeError extends BadRequestError {
  constructor(readonly reason: CodeRefusal) {
    super(reason === 'code missing' ? MfaMessages.codeRequired : MfaMessages.codeInvalid);
  }
}

/** The user a call acts for (a console session's user). */
export interface UserRef {
  accountId: string;
  userId: string;
}

type StoredUser = UserDoc & { _id: Types.ObjectId };

/** Called once the checks pass, right before the write: where the audit record of the change is written (audit.service.ts `change`). */
type BeforeWrite = () => Promise<void>;
const nothing = async () => {};

/** What the MFA service needs. */
export interface MfaServiceOptions {
  db: Models;
  vault: Vault;
  audit: AuditService;
  /** The clock codes are checked against (tests move it). */
  nowMs?: () => number;
}

/** Outcome of checking a code at login. */
export type LoginCodeCheck = 'ok' | 'wrong otp' | 'otp replayed';

/**
 * TOTP second factor of console users (RFC 6238: SHA-1, 6 digits, 30 s, ±1 step), stored on the
 * user document: `mfa_pending_secret` from enrolment until its first valid code, then
 * `mfa_secret` while MFA is on, both sealed by the vault. A code is single-use: its step
 * must be newer than `last_otp_step`, and it is claimed in `otp_uses`, whose unique index lets
 * one of two requests racing with one code win.
 */
export class MfaService {
  private readonly db: Models;
  private readonly vault: Vault;
  private readonly audit: AuditService;
  private readonly nowMs: () => number;

  constructor(opts: MfaServiceOptions) {
    this.db = opts.db;
    this.vault = opts.vault;
    this.audit = opts.audit;
    this.nowMs = opts.nowMs ?? Date.now;
  }

  /** Whether login needs a code from this user. */
  static isEnabled(user: Pick<UserDoc, 'mfa_secret'>): boolean {
    return Boolean(user.mfa_secret);
  }

  /** Whether MFA is on, and whether an enrolment waits for its first code (never the secret). */
  async state(ref: UserRef): Promise<MfaSetting> {
    const user = await this.load(ref);
    return { enabled: MfaService.isEnabled(user), pending: Boolean(user.mfa_pending_secret) };
  }

  /**
   * Starts an enrolment with a new secret, replacing any pending one (a lost QR code is
   * re-enrolled, not recovered). Throws ConflictError while MFA is on: replacing the active
   * factor must go through turning it off, which needs its code.
   */
  private async startEnrolment(ref: UserRef, beforeWrite: BeforeWrite): Promise<MfaEnrolment> {
    const user = await this.load(ref);
    if (user.mfa_secret) throw new ConflictError(MfaMessages.alreadyEnabled);
    const secret = generateTotpSecret();
    const text = base32Encode(secret);
    await beforeWrite();
    // Replay protection restarts with the new secret: steps used with an earlier one mean nothing to it.
    const updated = await this.db.users.updateOne(
      { _id: user._id, mfa_secret: null },
      { $set: { mfa_pending_secret: this.vault.seal(text, boundTo('user.mfa', user)), last_otp_step: 0 } },
    );
    if (updated.matchedCount === 0) throw new ConflictError(MfaMessages.alreadyEnabled);
    return { enabled: false, pending: true, secret: text, otpauth_url: otpauthUrl({ issuer: MFA_ISSUER, account: user.email, secret }) };
  }

  /**
   * Turns MFA on when `code` is valid for the pending secret; that code's step counts as used.
   * Throws MfaCodeError for a wrong code, ConflictError when no enrolment is pending.
   */
  private async activateWith(ref: UserRef, code: string, beforeWrite: BeforeWrite): Promise<MfaSetting> {
    const user = await this.load(ref);
    const pending = user.mfa_pending_secret as Sealed | null | undefined;
    if (!pending) throw new ConflictError(MfaMessages.nothingPending);
    const step = this.matchStep(user, pending, code);
    if (step === null) throw new MfaCodeError('wrong code');
    await beforeWrite();
    // Only the enrolment that was checked: one started meanwhile has a new iv and stays pending.
    const updated = await this.db.users.updateOne(
      { _id: user._id, 'mfa_pending_secret.iv': pending.iv },
      { $set: { mfa_secret: pending, mfa_pending_secret: null, last_otp_step: step } },
    );
    if (updated.matchedCount === 0) throw new ConflictError(MfaMessages.nothingPending);
    return { enabled: true, pending: false };
  }

  /**
   * Turns MFA off with a code of the active secret, or cancels a pending enrolment (no code: it
   * protects nothing yet). Answers what changed, null when there was nothing to turn off.
   * Throws MfaCodeError when MFA is on and the code is missing, wrong or already used.
   */
  private async disableWith(
    ref: UserRef, code: string | undefined, beforeWrite: (change: 'disable' | 'cancel') => Promise<void>,
  ): Promise<{ change: 'disable' | 'cancel' | null; setting: MfaSetting }> {
    const user = await this.load(ref);
    const off: MfaSetting = { enabled: false, pending: false };
    if (!user.mfa_secret) {
      if (!user.mfa_pending_secret) return { change: null, setting: off };
      await beforeWrite('cancel');
      const cancelled = await this.db.users.updateOne({ _id: user._id, mfa_secret: null }, { $set: { mfa_pending_secret: null } });
      // Verified meanwhile: MFA is on now and turning it off needs a code.
      if (cancelled.matchedCount === 0) return { change: null, setting: await this.state(ref) };
      return { change: 'cancel', setting: off };
    }
    if (!code) throw new MfaCodeError('code missing');
    const check = await this.consume(user, code, { mfa_secret: null, mfa_pending_secret: null }, () => beforeWrite('disable'));
    if (check !== 'ok') throw new MfaCodeError(check === 'wrong otp' ? 'wrong code' : 'code replayed');
    return { change: 'disable', setting: off };
  }

  /** Starts an enrolment (`startEnrolment`) for the caller of `by`, recorded write-ahead. */
  enroll(ref: UserRef, by: AuditBy): Promise<MfaEnrolment> {
    return this.audit.change(by, (announce) => this.startEnrolment(ref, () => announce(settingEntry('mfa', 'user', { change: 'enroll', enabled: false }))));
  }

  /** Turns MFA on (`activateWith`), recorded write-ahead; a refused code is audited before its 400. */
  activate(ref: UserRef, by: AuditBy, code: string): Promise<MfaSetting> {
    return this.auditingRefusals(by, 'activate', () => this.audit.change(by, (announce) =>
      this.activateWith(ref, code, () => announce(settingEntry('mfa', 'user', { change: 'activate', enabled: true })))));
  }

  /** Turns MFA off or cancels an enrolment (`disableWith`), recorded write-ahead; a refused code is audited before its 400. */
  async disable(ref: UserRef, by: AuditBy, code: string | undefined): Promise<MfaSetting> {
    const { setting } = await this.auditingRefusals(by, 'disable', () => this.audit.change(by, (announce) =>
      this.disableWith(ref, code, (change) => announce(settingEntry('mfa', 'user', { change, enabled: false })))));
    return setting;
  }

  /** Checks the login code of a user with MFA on, using it up when valid. */
  checkLoginCode(user: StoredUser, code: string): Promise<LoginCodeCheck> {
    return this.consume(user, code, {});
  }

  /**
   * Accepts `code` for the active secret once: the step it matched must be newer than the last
   * accepted one, in the same update that records it (and applies `alsoSet`).
   */
  private async consume(user: StoredUser, code: string, alsoSet: Record<string, unknown>, beforeWrite: BeforeWrite = nothing): Promise<LoginCodeCheck> {
    const active = user.mfa_secret as Sealed;
    const step = this.matchStep(user, active, code);
    if (step === null) return 'wrong otp';
    if (step <= user.last_otp_step) return 'otp replayed';
    // The claim is what makes a code single-use under concurrency (models/otp-use.model.ts).
    try {
      await this.db.otpUses.create({ user_id: user._id, secret_iv: active.iv, step });
    } catch (err) {
      if (isDuplicateKey(err)) return 'otp replayed';
      throw err;
    }
    await beforeWrite();
    const updated = await this.db.users.updateOne(
      { _id: user._id, 'mfa_secret.iv': active.iv },
      { $set: { ...alsoSet, last_otp_step: Math.max(step, user.last_otp_step) } },
    );
    // Claims older than the drift window can never match again.
    await this.db.otpUses.deleteMany({ user_id: user._id, step: { $lt: step - 10 } });
    return updated.matchedCount === 1 ? 'ok' : 'otp replayed';
  }

  /** Runs `change`, auditing a refused code (with its reason, never the code) before the 400 leaves. */
  private async auditingRefusals<T>(by: AuditBy, change: string, run: () => Promise<T>): Promise<T> {
    try {
      return await run();
    } catch (err) {
      if (err instanceof MfaCodeError) {
        await this.audit.recordRequest(by, {
          action: 'setting.update', outcome: 'failure', resource: { type: 'setting', id: 'mfa' },
          details: { scope: 'user', change, reason: err.reason },
        });
      }
      throw err;
    }
  }

  private matchStep(user: StoredUser, sealed: Sealed, code: string): number | null {
    return verifyTotp(base32Decode(this.vault.open<string>(sealed, boundTo('user.mfa', user))), code, this.nowMs());
  }

  private async load(ref: UserRef): Promise<StoredUser> {
    const user = await this.db.users.findOne({ _id: ref.userId, account_id: ref.accountId }).lean();
    if (!user) throw new NotFoundError('User not found');
    return user as StoredUser;
  }
}
