import { BaseCommand } from '../../base-command.js';
import { Messages } from '../../messages.js';
import { record } from '../../output.js';
import { verifySecret } from './login.js';

export interface StatusResult {
  profile: string;
  /** The API base URL every command of this profile calls. */
  url: string;
  /** Where that URL came from: XFER_URL, --url or the profile, and whether /api/v1 was added to it. */
  url_source: string;
  api_path_added: boolean;
  /** Where the secret came from: XFER_API_KEY, the keychain, or the fallback file. */
  source: 'env' | 'keychain' | 'file';
  auth: 'api-key' | 'session';
  expires_at: string | null;
}

export default class Status extends BaseCommand<typeof Status> {
  static override summary = 'Show which API URL and credentials a profile uses, and check them (GET /connections).';
  static override description = 'Resolves the credentials as every command does (XFER_API_KEY and XFER_URL first, then the profile) and checks them with one API call: exit code 3 when they are refused.';
  static override examples = ['<%= config.bin %> auth status', '<%= config.bin %> auth status --profile staging --json'];

  async run(): Promise<StatusResult> {
    const auth = this.resolveAuth();
    const from = this.resolveUrlFrom()!;
    await verifySecret(this.client(auth));
    const stored = auth.source === 'env' ? undefined : this.settings.get(auth.profile);
    const result: StatusResult = {
      profile: auth.profile, url: auth.url, url_source: from.source, api_path_added: from.added, source: auth.source,
      auth: stored?.auth ?? 'api-key', expires_at: stored?.expires_at ?? null,
    };
    const { url_source: _source, api_path_added: _added, ...shown } = result;
    this.print(record({ ...shown, url: from.added ? Messages.apiPathAdded(auth.url, from.source) : `${auth.url} (from ${from.source})`, status: 'ok' }));
    return result;
  }
}
