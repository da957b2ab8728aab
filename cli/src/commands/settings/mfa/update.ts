import { Flags } from '@oclif/core';
import type { MfaEnrolment, MfaSetting } from '@xfer/shared';
import { BaseCommand, usageError } from '../../../base-command.js';
import { Messages } from '../../../messages.js';
import { record } from '../../../output.js';
import { CONSOLE_ONLY } from '../../../resources/settings.js';

export default class Update extends BaseCommand<typeof Update> {
  static override summary = 'Start an MFA enrolment, or turn MFA off (PUT /settings/mfa).';
  static override description = `--enable starts an enrolment: the answer carries the TOTP secret and its otpauth:// URL, shown this once; MFA is on once settings mfa verify confirms a code. --disable --code <current code> turns MFA off (a pending enrolment is cancelled without a code).
A wrong or missing code is exit code 2. ${CONSOLE_ONLY}`;
  static override examples = [
    '<%= config.bin %> settings mfa update --enable',
    '<%= config.bin %> settings mfa update --disable --code 123456',
  ];
  static override flags = {
    enable: Flags.boolean({ description: 'Start an enrolment (prints the new secret once)', exclusive: ['disable'] }),
    disable: Flags.boolean({ description: 'Turn MFA off (needs --code)', exclusive: ['enable'] }),
    code: Flags.string({ description: 'A current code of your authenticator (to turn MFA off)', dependsOn: ['disable'] }),
  };

  async run(): Promise<MfaSetting | MfaEnrolment> {
    const { enable, disable, code } = this.flags;
    if (!enable && !disable) throw usageError(Messages.mfaEnableOrDisable);
    const answer = await this.client().settings.updateMfa({ enabled: enable === true, ...(code !== undefined && { code }) });
    this.print(record(answer));
    if ('secret' in answer) this.note(Messages.mfaEnrolment);
    return answer;
  }
}
