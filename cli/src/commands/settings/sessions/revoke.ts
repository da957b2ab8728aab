import type { SessionsRevoked } from '@xfer/shared';
import { BaseCommand } from '../../../base-command.js';
import { Messages } from '../../../messages.js';
import { record } from '../../../output.js';
import { CONSOLE_ONLY } from '../../../resources/settings.js';

export default class Revoke extends BaseCommand<typeof Revoke> {
  static override summary = 'Sign out everywhere (DELETE /settings/sessions).';
  static override description = `Every session of yours stops working, the one this command uses included: run auth login again afterwards. API keys are not affected. ${CONSOLE_ONLY}`;
  static override examples = ['<%= config.bin %> settings sessions revoke'];

  async run(): Promise<SessionsRevoked> {
    const revoked = await this.client().settings.revokeSessions();
    this.print(record(revoked));
    this.note(Messages.sessionsRevoked);
    return revoked;
  }
}
