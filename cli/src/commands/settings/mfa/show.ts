import type { MfaSetting } from '@xfer/shared';
import { BaseCommand } from '../../../base-command.js';
import { record } from '../../../output.js';
import { CONSOLE_ONLY } from '../../../resources/settings.js';

export default class Show extends BaseCommand<typeof Show> {
  static override summary = 'Show whether MFA is on for you (GET /settings/mfa).';
  static override description = `enabled: a TOTP authenticator is confirmed and login needs its code (auth login --otp); pending: an enrolment awaits its first code. ${CONSOLE_ONLY}`;
  static override examples = ['<%= config.bin %> settings mfa show', '<%= config.bin %> settings mfa show --json | jq .enabled'];

  async run(): Promise<MfaSetting> {
    const mfa = await this.client().settings.getMfa();
    this.print(record(mfa));
    return mfa;
  }
}
