import { BaseCommand } from '../../base-command.js';
import { record } from '../../output.js';
import { verifySecret } from './login.js';

export interface StatusResult {
  profile: string;
  url: string;
  /** Where the secret came from: XFER_API_KEY, the keychain, or the fallback file. */
  source: 'env' | 'keychain' | 'file';
  auth: 'api-key' | 'session';
  expires_at: string | null;
}

export default class Status extends BaseCommand<typeof Status> {
  static override summary = 'Show which server and credentials a profile uses, and check them (GET /connections).';
  static override description = 'Resolves the credentials as every command does (XFER_API_KEY and XFER_URL first, then the profile) and checks them with one API call: exit code 3 when they are refused.';
  static override examples = ['<%= config.bin %> auth status', '<%= config.bin %> auth status --profile staging --json'];

  async run(): Promise<StatusResult> {
    const auth = this.resolveAuth();
    await verifySecret(this.client(auth));
    const stored = auth.source === 'env' ? undefined : this.settings.get(auth.profile);
    const result: StatusResult = {
      profile: auth.profile, url: auth.url, source: auth.source,
      auth: stored?.auth ?? 'api-key', expires_at: stored?.expires_at ?? null,
    };
    this.print(record({ ...result, status: 'ok' }));
    return result;
  }
}
