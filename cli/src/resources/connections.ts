import { Args, Flags } from '@oclif/core';
import { CONNECTION_TYPES, type Connection, type ConnectionType, type CreateConnectionRequest } from '@xfer/shared';
import { usageError } from '../base-command.js';
import { parseJsonObject, readStdin, readTextFile } from '../input.js';
import { Messages } from '../messages.js';
import type { Column } from '../output.js';

export const connectionColumns: Column<Connection>[] = [
  { header: 'id', get: (c) => c.id },
  { header: 'name', get: (c) => c.name },
  { header: 'type', get: (c) => c.type },
  { header: 'host', get: (c) => c.host },
  { header: 'port', get: (c) => c.port },
  { header: 'path', get: (c) => c.path },
  { header: 'agent_id', get: (c) => c.agent_id },
  { header: 'agent_pool', get: (c) => c.agent_pool },
];

export const connectionIdArg = { id: Args.string({ description: 'Connection id', required: true }) };

/** Flags named after the API's fields, shared by create and update. */
export const connectionFieldFlags = {
  type: Flags.string({ description: 'Storage type', options: [...CONNECTION_TYPES] }),
  host: Flags.string({ description: 'Host name or IP, without scheme or port' }),
  port: Flags.integer({ description: "Port (the type's default when absent)", min: 1, max: 65535 }),
  path: Flags.string({ description: 'Base path on the endpoint, starting with /' }),
  options: Flags.string({ description: 'Non-secret options as a JSON object, e.g. \'{"force_path_style":true}\'' }),
  'agent-id': Flags.string({ description: 'Agent that serves this connection', exclusive: ['agent-pool'] }),
  'agent-pool': Flags.string({ description: 'Pool (agent label) whose agents serve this connection' }),
  'credentials-file': Flags.file({ description: 'JSON file with the credentials object', exists: true, exclusive: ['credentials-stdin'] }),
  'credentials-stdin': Flags.boolean({ description: 'Read the credentials JSON object from stdin' }),
};

/** The credentials object from --credentials-file or --credentials-stdin, or undefined when neither is given. */
async function readCredentials(flags: { 'credentials-file'?: string; 'credentials-stdin'?: boolean }): Promise<Record<string, unknown> | undefined> {
  const file = flags['credentials-file'];
  if (!file && !flags['credentials-stdin']) return undefined;
  const source = file ?? 'stdin';
  const text = file ? readTextFile(file) : await readStdin();
  return parseJsonObject(text, (reason) => usageError(Messages.credentialsNotJson(source, reason)));
}

function parseOptions(text: string | undefined): Record<string, unknown> | undefined {
  return text === undefined ? undefined : parseJsonObject(text, (reason) => usageError(Messages.optionsNotJson(reason)));
}

type FieldFlags = {
  type?: string; host?: string; port?: number; path?: string; options?: string; 'agent-id'?: string; 'agent-pool'?: string;
  'credentials-file'?: string; 'credentials-stdin'?: boolean;
};

/** The request fields given as `connectionFieldFlags` (create and update send the same ones); absent flags are left out. */
export async function connectionFields(f: FieldFlags): Promise<Partial<Omit<CreateConnectionRequest, 'name'>>> {
  const credentials = await readCredentials(f);
  const options = parseOptions(f.options);
  return {
    ...(f.type !== undefined && { type: f.type as ConnectionType }),
    ...(f.host !== undefined && { host: f.host }),
    ...(f.port !== undefined && { port: f.port }),
    ...(f.path !== undefined && { path: f.path }),
    ...(credentials && { credentials }),
    ...(options && { options }),
    ...(f['agent-id'] !== undefined && { agent_id: f['agent-id'] }),
    ...(f['agent-pool'] !== undefined && { agent_pool: f['agent-pool'] }),
  };
}
