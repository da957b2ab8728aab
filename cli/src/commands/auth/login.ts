import { Flags } from '@oclif/core';
import { ApiError, type XferClient } from '@xfer/shared';
import { BaseCommand, usageError } from '../../base-command.js';
import type { SecretLocation } from '../../credentials/secret-store.js';
import { promptHidden, readPassword, readStdin } from '../../input.js';
import { Messages } from '../../messages.js';

export interface LoginResult {
  profile: string;
  url: string;
  auth: 'api-key' | 'session';
  stored_in: SecretLocation;
  expires_at: string | null;
}

/** Checks the secret with one call: 401 means it is wrong; 403 (a key without connections:read) still proves it. */
export async function verifySecret(client: XferClient): Promise<void> {
  try {
    await client.connections.list({ limit: 1 });
  } catch (err) {
    if (err instanceof ApiError && err.status === 403) return;
    throw err;
  }
}

export default class Login extends BaseCommand<typeof Login> {
  static override summary = 'Log in to an xfer server and store the secret for a profile (POST /auth/login, GET /connections).';
  static override description = `With an API key (--api-key, or piped on stdin), or with --email and a password (asked on the terminal, or piped with --password-stdin) for a session.
The secret is checked with one API call, then stored in the OS keychain (service "xfer", account = profile), or in a 0600 file when no keychain is reachable. The URL is stored with the profile.`;

  static override examples = [
    'echo "$XFER_KEY" | <%= config.bin %> auth login --url https://xfer.example.com/api/v1',
    '<%= config.bin %> auth login --url https://xfer.example.com/api/v1 --email me@example.com',
    '<%= config.bin %> auth login --profile staging --url https://staging.example.com/api/v1 --api-key xfk_...',
  ];

  static override flags = {
    'api-key': Flags.string({ description: 'API key (prefer stdin: flags land in shell history)', exclusive: ['email'] }),
    email: Flags.string({ description: 'Email of a user, to log in with a password for a session token' }),
    'password-stdin': Flags.boolean({ description: 'Read the password from stdin', dependsOn: ['email'] }),
    otp: Flags.string({ description: 'One-time code, when the user has MFA on', dependsOn: ['email'] }),
  };

  async run(): Promise<LoginResult> {
    const { profile, email } = this.flags;
    const url = this.resolveUrl();
    if (!url) throw usageError(Messages.noUrl(profile));

    let secret: string;
    let expiresAt: string | null = null;
    if (email) {
      const password = await readPassword(this.flags['password-stdin'], 'Password: ');
      const session = await this.client({ url }).auth.login({ email, password, ...(this.flags.otp ? { otp: this.flags.otp } : {}) });
      secret = session.token;
      expiresAt = session.expires_at;
    } else {
      const key = this.flags['api-key'] ?? (process.stdin.isTTY ? await promptHidden('API key: ') : (await readStdin()).trim());
      if (!key) throw usageError(Messages.secretMissing);
      secret = key;
    }
    await verifySecret(this.client({ url, secret }));

    const auth = email ? 'session' : 'api-key';
    const storedIn = this.secrets.set(profile, secret);
    this.settings.set(profile, { url, auth, ...(expiresAt ? { expires_at: expiresAt } : {}) });
    this.print(Messages.loggedIn(profile, url, storedIn));
    return { profile, url, auth, stored_in: storedIn, expires_at: expiresAt };
  }
}

