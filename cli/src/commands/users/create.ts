import { Flags } from '@oclif/core';
import type { User } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { readPassword } from '../../input.js';
import { record } from '../../output.js';
import { asRole, passwordStdinDescription, roleFlagOptions } from '../../resources/users.js';

export default class Create extends BaseCommand<typeof Create> {
  static override summary = 'Add a user to the account (POST /users).';
  static override description = `The password (12 characters or more) is asked on the terminal without echo, or read from stdin with --password-stdin; never from a flag value. Only an owner creates owners (exit code 3 otherwise).
Exit code 5 when the email is taken.`;
  static override examples = [
    '<%= config.bin %> users create --email ana@example.com --role admin --name "Ana Silva"',
    `printf '%s' "$PASSWORD" | <%= config.bin %> users create --email ci@example.com --role member --password-stdin --json`,
  ];
  static override flags = {
    email: Flags.string({ description: 'Email, the login name (unique across the service)', required: true }),
    role: Flags.string({ ...roleFlagOptions, required: true }),
    name: Flags.string({ description: 'Display name (default: the part of the email before @)' }),
    'password-stdin': Flags.boolean({ description: passwordStdinDescription }),
  };

  async run(): Promise<User> {
    const f = this.flags;
    const password = await readPassword(f['password-stdin'], 'Password for the new user: ');
    const user = await this.client().users.create({ email: f.email, role: asRole(f.role)!, password, ...(f.name !== undefined && { name: f.name }) });
    this.print(record(user));
    return user;
  }
}
