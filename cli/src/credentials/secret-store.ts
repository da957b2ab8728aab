import { Entry } from '@napi-rs/keyring';
import { JsonProfileFile } from './profile-store.js';

/** Where a secret was stored or found. */
export type SecretLocation = 'keychain' | 'file';

/**
 * A profile's secret (API key or session token): in the OS keychain (service `xfer`, account =
 * profile name) through @napi-rs/keyring, or, when no keychain is reachable (headless CI without a
 * D-Bus session), in a 0600 `credentials.json` in a 0700 directory. `onFallback` is told once why.
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
      // A secret left in the file by an earlier fallback would shadow nothing but should not linger.
      if (this.file.get(profile)) this.file.set(profile, undefined);
      return 'keychain';
    } catch (err) {
      this.onFallback(errorMessage(err));
      this.file.set(profile, { secret });
      return 'file';
    }
  }

  get(profile: string): { secret: string; location: SecretLocation } | null {
    try {
      const secret = new Entry(this.service, profile).getPassword();
      if (secret) return { secret, location: 'keychain' };
    } catch {
      // No keychain reachable: the file is the only place the secret can be.
    }
    const stored = this.file.get(profile);
    return stored ? { secret: stored.secret, location: 'file' } : null;
  }

  /** Removes the secret from both places; true when one was there. */
  delete(profile: string): boolean {
    let removed = false;
    try {
      removed = new Entry(this.service, profile).deletePassword();
    } catch {
      // No keychain reachable: nothing stored there.
    }
    if (this.file.get(profile)) {
      this.file.set(profile, undefined);
      removed = true;
    }
    return removed;
  }
}

function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
