import { readFileSync } from 'node:fs';
import { usageError } from './base-command.js';
import { Messages } from './messages.js';

/** All of stdin as text, without the trailing newline a pipe usually adds. */
export async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8').replace(/\r?\n$/, '');
}

/** Asks on the terminal without echoing what is typed; null when stdin is not a terminal. */
export async function promptHidden(question: string): Promise<string | null> {
  const stdin = process.stdin;
  if (!stdin.isTTY) return null;
  process.stderr.write(question);
  stdin.setRawMode(true);
  stdin.resume();
  stdin.setEncoding('utf8');
  try {
    return await new Promise<string>((resolve, reject) => {
      let value = '';
      const onData = (chars: string) => {
        for (const ch of chars) {
          if (ch === '\r' || ch === '\n') { stdin.off('data', onData); resolve(value); return; }
          if (ch === '\u0003') { stdin.off('data', onData); reject(new Error('Interrupted')); return; }
          if (ch === '\u007f') value = value.slice(0, -1);
          else value += ch;
        }
      };
      stdin.on('data', onData);
    });
  } finally {
    stdin.setRawMode(false);
    stdin.pause();
    process.stderr.write('\n');
  }
}

/** Parses JSON that must be an object; `describe` names the source in the error. */
export function parseJsonObject(text: string, onError: (reason: string) => Error): Record<string, unknown> {
  let value: unknown;
  try { value = JSON.parse(text); } catch (err) { throw onError((err as Error).message); }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw onError('expected an object');
  return value as Record<string, unknown>;
}

export function readTextFile(path: string): string {
  return readFileSync(path, 'utf8');
}

/**
 * The password from stdin with --password-stdin, else asked on the terminal (not echoed). A
 * pipe without --password-stdin is refused rather than read, so a script never sends a password
 * it did not mean to.
 */
export async function readPassword(fromStdin: boolean, question: string): Promise<string> {
  const password = fromStdin ? await readStdin() : await promptHidden(question);
  if (!password) throw usageError(Messages.passwordMissing);
  return password;
}
