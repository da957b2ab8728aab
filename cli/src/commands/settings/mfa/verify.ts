import { Flags } from '@oclif/core';
import type { MfaSetting } from '@xfer/shared';
import { BaseCommand } from '../../../base-command.js';
import { record } from '../../../output.js';
import { CONSOLE_ONLY } from '../../../resources/settings.js';

export default class Verify extends BaseCommand<typeof Verify> {
  static override summary = 'Turn MFA on with a first code of the pending enrolment (POST /settings/mfa/verify).';
  static override description = `From then on, auth login --email needs --otp. A wrong code is exit code 2, and so is having no enrolment pending (start one with settings mfa update --enable). ${CONSOLE_ONLY}`;
  static override examples = ['<%= config.bin %> settings mfa verify --code 123456'];
  static override flags = { code: Flags.string({ description: 'The code your authenticator shows now', required: true }) };

  async run(): Promise<MfaSetting> {
    const mfa = await this.client().settings.verifyMfa({ code: this.flags.code });
    this.print(record(mfa));
    return mfa;
  }
}
