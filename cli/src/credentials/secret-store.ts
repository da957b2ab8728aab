import { Entry } from '@napi-rs/keyring';
import { Errors } from '@oclif/core';
import { ExitCode } from '@xfer/shared';
import { Messages } from '../messages.js';
import { JsonProfileFile } from './profile-store.js';

/** Where a secret was stored or found. */
export type SecretLocation = 'keychain' | 'file';

/**
 * The keychain holds the profile's secret but is locked, and no unlock prompt could be shown (a
 * headless session) or it was dismissed. Exit code 3, like "not logged in", but saying why: the
 * secret is still there, it only needs the keychain unlocked.
 */
export class KeychainLockedError extends Errors.CLIError {
  constructor(profile: string, reason: string) {
    super(Messages.keychainLocked(profile, reason), { exit: ExitCode.auth });
  }
}

/**
 * A profile's secret (API key or session token): in the OS keychain (service `xfer`, account =
 * profile name) through @napi-rs/keyring, or, when no keychain is reachable (headless CI without a
 * D-Bus session) or it refuses the secret (locked, with no unlock prompt possible), in a 0600
 * `credentials.json` in a 0700 directory. `onFallback` is told once why.
 *
 * The file holds a profile's secret only when its latest `set` could not use the keychain (a
 * keychain store removes it), so it is read first: an older keychain item that could not be
 * replaced while the keychain was locked must not win over the newer secret once it is unlocked.
 */
export class SecretStore {
  private readonly file: JsonProfileFile<{ secret: string }>;

  constructor(configDir: string, private readonly onFallback: (reason: string) => void, private readonly service = 'xfer') {
    this.file = new JsonProfileFile(configDir, 'credentials.json', 0o600);
  }

  get filePath(): string { return this.file.path; }

  /** Stores the secret, in the keychain when it accepts it, else in the file. */
  set(profile: string, secret: string): SecretLocation {
    try {
      new Entry(this.service, profile).setPassword(secret);
      // The file's copy would shadow the keychain (it is read first): it is the older one now.
      if (this.file.get(profile)) this.file.set(profile, undefined);
      return 'keychain';
    } catch (err) {
      this.onFallback(errorMessage(err));
      this.file.set(profile, { secret });
      return 'file';
    }
  }

  /** The secret, or null when none is stored; throws KeychainLockedError when it is in a locked keychain. */
  get(profile: string): { secret: string; location: SecretLocation } | null {
    const stored = this.file.get(profile);
    if (stored) return { secret: stored.secret, location: 'file' };
    try {
      const secret = new Entry(this.service, profile).getPassword();
      return secret ? { secret, location: 'keychain' } : null;
    } catch (err) {
      if (isLocked(err)) throw new KeychainLockedError(profile, errorMessage(err));
      // No keychain reachable: nothing can be stored there.
      return null;
    }
  }

  /**
   * Removes the secret from both places; true when one was there. Throws KeychainLockedError,
   * touching nothing, when the keychain is locked: a logout must not report success while the
   * secret stays behind in the keychain.
   */
  delete(profile: string): boolean {
    let removed = false;
    try {
      removed = new Entry(this.service, profile).deletePassword();
    } catch (err) {
      if (isLocked(err)) throw new KeychainLockedError(profile, errorMessage(err));
      // No keychain reachable: nothing stored there.
    }
    if (this.file.get(profile)) {
      this.file.set(profile, undefined);
      removed = true;
    }
    return removed;
  }
}

/**
 * The Secret Service answered but would not open the item: "Secret Service: object locked" or
 * "Secret Service: unlock prompt was dismissed" (the messages of the keyring crate's Linux store;
 * the error has no other distinguishing code). Anything else means no keychain is reachable.
 */
function isLocked(err: unknown): boolean {
  return /object locked|unlock prompt/i.test(errorMessage(err));
}

function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
