import type { SessionsSetting } from '@xfer/shared';
import { BaseCommand } from '../../../base-command.js';
import { record } from '../../../output.js';
import { CONSOLE_ONLY } from '../../../resources/settings.js';

export default class Show extends BaseCommand<typeof Show> {
  static override summary = 'Show your session settings (GET /settings/sessions).';
  static override description = `sessions_valid_after (sessions issued before it are refused), session_ttl_seconds, and when the session in use expires. ${CONSOLE_ONLY}`;
  static override examples = ['<%= config.bin %> settings sessions show', '<%= config.bin %> settings sessions show --json | jq -r .current_session_expires_at'];

  async run(): Promise<SessionsSetting> {
    const sessions = await this.client().settings.getSessions();
    this.print(record(sessions));
    return sessions;
  }
}
