import { Flags } from '@oclif/core';
import type { UpdateUserRequest, User } from '@xfer/shared';
import { BaseCommand, usageError } from '../../base-command.js';
import { readPassword } from '../../input.js';
import { Messages } from '../../messages.js';
import { record } from '../../output.js';
import { asRole, passwordStdinDescription, roleFlagOptions, userIdArg } from '../../resources/users.js';

export default class Update extends BaseCommand<typeof Update> {
  static override summary = 'Change a user (PUT /users/:id).';
  static override description = `Only the fields given change. A new password is read from stdin (--password-stdin) or asked on the terminal (--password-prompt); setting one signs the user out of every session.
Only an owner changes an owner or promotes to owner (exit code 3 otherwise); demoting the last owner is exit code 5.`;
  static override examples = [
    '<%= config.bin %> users update 665f1c2e9b1d4a0012345678 --role viewer',
    `printf '%s' "$NEW_PASSWORD" | <%= config.bin %> users update 665f1c2e9b1d4a0012345678 --password-stdin`,
  ];
  static override args = userIdArg;
  static override flags = {
    name: Flags.string({ description: 'New display name' }),
    role: Flags.string(roleFlagOptions),
    'password-stdin': Flags.boolean({ description: passwordStdinDescription, exclusive: ['password-prompt'] }),
    'password-prompt': Flags.boolean({ description: 'Ask for a new password on the terminal (not echoed)' }),
  };

  async run(): Promise<User> {
    const f = this.flags;
    const newPassword = f['password-stdin'] || f['password-prompt'];
    const body: UpdateUserRequest = {
      ...(f.name !== undefined && { name: f.name }),
      ...(f.role !== undefined && { role: asRole(f.role) }),
      ...(newPassword && { password: await readPassword(f['password-stdin'], 'New password: ') }),
    };
    if (Object.keys(body).length === 0) throw usageError(Messages.nothingToUpdate);
    const user = await this.client().users.update(this.args.id, body);
    this.print(record(user));
    return user;
  }
}
