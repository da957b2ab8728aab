import { BaseCommand } from '../../base-command.js';
import { Messages } from '../../messages.js';

export interface LogoutResult { profile: string; removed: boolean }

export default class Logout extends BaseCommand<typeof Logout> {
  static override summary = "Remove a profile's stored secret and settings.";
  static override description = 'Deletes the secret from the OS keychain and from the fallback file, and the profile from config.json. The key itself stays valid on the server: revoke it with api-keys revoke.';
  static override examples = ['<%= config.bin %> auth logout', '<%= config.bin %> auth logout --profile staging'];

  async run(): Promise<LogoutResult> {
    const { profile } = this.flags;
    const removed = this.secrets.delete(profile);
    this.settings.set(profile, undefined);
    this.print(removed ? Messages.loggedOut(profile) : Messages.notStored(profile));
    return { profile, removed };
  }
}
