import { chmodSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** Non-secret settings of one profile, kept in `config.json`. */
export interface ProfileSettings {
  url: string;
  /** What the stored secret is: an API key, or a session token from `auth login --email`. */
  auth: 'api-key' | 'session';
  /** When a session token expires (absent for API keys). */
  expires_at?: string;
}

/** Reads and writes a JSON file of `{profiles: {name: T}}` in the config directory, with a given mode. */
export class JsonProfileFile<T> {
  constructor(readonly dir: string, readonly file: string, private readonly mode: number) {}

  get path(): string { return join(this.dir, this.file); }

  read(): Record<string, T> {
    try {
      const parsed = JSON.parse(readFileSync(this.path, 'utf8')) as { profiles?: Record<string, T> };
      return parsed.profiles ?? {};
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return {};
      throw err;
    }
  }

  get(profile: string): T | undefined { return this.read()[profile]; }

  set(profile: string, value: T | undefined): void {
    const profiles = this.read();
    if (value === undefined) delete profiles[profile];
    else profiles[profile] = value;
    mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    chmodSync(this.dir, 0o700);
    // Write a sibling then rename, so a reader never sees half a file and the mode holds from the first byte.
    const tmp = `${this.path}.${process.pid}.tmp`;
    writeFileSync(tmp, JSON.stringify({ profiles }, null, 2) + '\n', { mode: this.mode });
    chmodSync(tmp, this.mode);
    renameSync(tmp, this.path);
  }
}

/** `$XDG_CONFIG_HOME/xfer`, else `~/.config/xfer`. */
export function configDir(env: NodeJS.ProcessEnv, home: string): string {
  return join(env.XDG_CONFIG_HOME || join(home, '.config'), 'xfer');
}
