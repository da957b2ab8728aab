import { Args, Errors, Flags } from '@oclif/core';
import { ExitCode, type Parameter, type XferClient } from '@xfer/shared';
import { usageError } from '../base-command.js';
import { promptHidden, readStdin } from '../input.js';
import { Messages } from '../messages.js';
import type { Column } from '../output.js';

export const parameterColumns: Column<Parameter>[] = [
  { header: 'id', get: (p) => p.id },
  { header: 'name', get: (p) => p.name },
  // A secret value is never returned: the column says so instead of showing an empty value.
  { header: 'value', get: (p) => (p.secret ? '(secret)' : p.value) },
  { header: 'description', get: (p) => p.description },
  { header: 'updated_at', get: (p) => p.updated_at },
];

export const parameterIdArg = { id: Args.string({ description: 'Parameter id or name', required: true }) };

const OBJECT_ID = /^[0-9a-f]{24}$/i;

/**
 * The id of a parameter given by id or by name (GET /parameters?name=, exact). 24 hex digits are
 * taken for an id, so a parameter with such a name is reached by its id.
 */
export async function parameterId(client: XferClient, ref: string): Promise<string> {
  if (OBJECT_ID.test(ref)) return ref;
  const { data } = await client.parameters.list({ name: ref, limit: 1 });
  if (!data[0]) throw new Errors.CLIError(Messages.parameterNotFound(ref), { exit: ExitCode.notFound });
  return data[0].id;
}

const nameFlag = { description: 'Name used in templates as {{params.NAME}} (a letter or _, then letters, digits, _; at most 64)' };

/** Flags named after the API's fields: create needs a name, update takes any. */
export const parameterFlags = {
  name: Flags.string(nameFlag),
  value: Flags.string({ description: 'The value (plain parameters; a secret value is piped with --value-stdin)', exclusive: ['value-stdin'] }),
  'value-stdin': Flags.boolean({ description: 'Read the value from stdin (the way to give a secret value)', exclusive: ['value'] }),
  description: Flags.string({ description: 'What the parameter is for' }),
};
export const parameterCreateFlags = { ...parameterFlags, name: Flags.string({ ...nameFlag, required: true }) };

/**
 * The value from --value or stdin (--value-stdin), or undefined when neither is given. A secret
 * value is never taken from the command line, where the process list and the shell history
 * show it; on a terminal it is asked for without echo.
 */
export async function readParameterValue(
  flags: { value?: string; 'value-stdin'?: boolean }, secret: boolean, required: boolean,
): Promise<string | undefined> {
  if (flags.value !== undefined) {
    if (secret) throw usageError(Messages.secretValueOnCommandLine);
    return flags.value;
  }
  if (flags['value-stdin']) return readStdin();
  if (!required) return undefined;
  const asked = secret ? await promptHidden('Value: ') : null;
  if (asked === null) throw usageError(Messages.parameterValueMissing);
  return asked;
}
