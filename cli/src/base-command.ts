import { homedir } from 'node:os';
import { Command, Errors, Flags, type Interfaces } from '@oclif/core';
import { ApiError, TransferFailedError, XferClient, exitCodeOf, ExitCode } from '@xfer/shared';
import { configDir, JsonProfileFile, type ProfileSettings } from './credentials/profile-store.js';
import { SecretStore, type SecretLocation } from './credentials/secret-store.js';
import { Messages } from './messages.js';
import { writeLine } from './progress/index.js';
import { errorLine } from './output.js';
import type { ListOutput } from './resources/lists.js';

export type BaseFlags<T extends typeof Command> = Interfaces.InferredFlags<(typeof BaseCommand)['baseFlags'] & T['flags']>;
export type BaseArgs<T extends typeof Command> = Interfaces.InferredArgs<T['args']>;

/** Where the commands's credentials came from. */
export interface ResolvedAuth {
  profile: string;
  url: string;
  secret: string;
  source: 'env' | SecretLocation;
}

/** Further attempts after a 429, 503 or network failure (the client's backoff honours Retry-After). */
const RETRIES = 4;

const isHttpUrl = (url: string) => URL.canParse(url) && /^https?:$/.test(new URL(url).protocol);

/** The API's path on a server (docs/api.md): every endpoint lives under it. */
const API_PATH = '/api/v1';

/**
 * The API base URL for a server URL given with or without `/api/v1`: `npm start` and
 * `xfer-server start` print the server's address, people paste it, and "No route for GET
 * /connections" helped nobody. A URL already ending in /api/v1 is kept (a proxy may mount the API
 * under a prefix: https://corp.example.com/xfer/api/v1); anything else gets /api/v1 appended, the
 * query and fragment dropped (a base URL has none).
 */
export function apiBaseUrl(url: string): { url: string; added: boolean } {
  const u = new URL(url);
  const path = u.pathname.replace(/\/+$/, '');
  const added = !path.endsWith(API_PATH);
  u.pathname = added ? `${path}${API_PATH}` : path;
  u.search = '';
  u.hash = '';
  return { url: u.toString(), added };
}

/** A usage error: exit code 2, like oclif's own flag and argument errors. */
export function usageError(message: string): Errors.CLIError {
  return new Errors.CLIError(message, { exit: ExitCode.usage });
}

/**
 * Every xfer command: the global flags (`--json`, `--profile`, `--url`), credentials resolution
 * (`XFER_API_KEY`/`XFER_URL` over the profile's stored secret and url), and one error path
 * (one stderr line, `{"error"}` with `--json`, exit code from `exitCodeOf`). `run()` returns what
 * `--json` prints: exactly the API's `data`.
 */
export abstract class BaseCommand<T extends typeof Command> extends Command {
  static override enableJsonFlag = true;

  static override baseFlags = {
    profile: Flags.string({ description: 'Profile: which stored server and secret to use', default: 'default', env: 'XFER_PROFILE', helpGroup: 'GLOBAL' }),
    url: Flags.string({ description: 'Server URL, e.g. https://xfer.example.com (/api/v1 is added when left out; XFER_URL overrides it)', helpGroup: 'GLOBAL' }),
  };

  protected flags!: BaseFlags<T>;
  protected args!: BaseArgs<T>;
  private warned = false;

  override async init(): Promise<void> {
    await super.init();
    const { flags, args } = await this.parse(this.ctor);
    this.flags = flags as BaseFlags<T>;
    this.args = args as BaseArgs<T>;
  }

  protected get configDir(): string { return configDir(process.env, homedir()); }

  protected get settings(): JsonProfileFile<ProfileSettings> {
    return new JsonProfileFile<ProfileSettings>(this.configDir, 'config.json', 0o600);
  }

  protected get secrets(): SecretStore {
    const store: SecretStore = new SecretStore(this.configDir, (reason) => {
      if (this.warned) return;
      this.warned = true;
      process.stderr.write(Messages.keychainFallback(store.filePath, reason) + '\n');
    });
    return store;
  }

  /**
   * The API base URL: XFER_URL, else --url, else the profile's, with /api/v1 added when it was
   * left out (apiBaseUrl); a usage error when it is not an http(s) URL.
   */
  protected resolveUrl(): string | undefined {
    return this.resolveUrlFrom()?.url;
  }

  /** resolveUrl, and where the URL came from and whether /api/v1 was added (for auth status). */
  protected resolveUrlFrom(): { url: string; source: string; added: boolean } | undefined {
    const [url, source] = process.env.XFER_URL ? [process.env.XFER_URL, 'XFER_URL']
      : this.flags.url ? [this.flags.url, '--url']
      : [this.settings.get(this.flags.profile)?.url, `profile "${this.flags.profile}"`];
    if (url === undefined) return undefined;
    if (!isHttpUrl(url)) throw usageError(Messages.badUrl(url, source));
    return { ...apiBaseUrl(url), source };
  }

  /** The credentials to call the API with; a usage error when there are none. */
  protected resolveAuth(): ResolvedAuth {
    const profile = this.flags.profile;
    const url = this.resolveUrl();
    const envKey = process.env.XFER_API_KEY;
    const stored = envKey ? null : this.secrets.get(profile);
    if (!envKey && !stored) throw new Errors.CLIError(Messages.notLoggedIn(profile), { exit: ExitCode.auth });
    if (!url) throw usageError(Messages.noUrl(profile));
    return envKey ? { profile, url, secret: envKey, source: 'env' } : { profile, url, secret: stored!.secret, source: stored!.location };
  }

  protected client(auth: { url: string; secret?: string } = this.resolveAuth()): XferClient {
    return new XferClient({
      baseUrl: auth.url, token: auth.secret, userAgent: `xfer-cli/${this.config.version}`, retries: RETRIES,
      // People see why nothing happens for a while; scripts (--json) get only the outcome.
      onRetry: ({ error, delayMs, attempt }) => this.note(Messages.retrying(error.message, delayMs, attempt, RETRIES + 1)),
    });
  }

  /** Where a list command writes (see printList). */
  protected get listOutput(): ListOutput {
    return { json: this.jsonEnabled(), stdout: process.stdout };
  }

  /** A line for people on stderr (a warning, a next step): not with --json, above a live progress view. */
  protected note(line: string): void {
    if (!this.jsonEnabled()) writeLine(line);
  }

  /** Human output: only when --json is off. */
  protected print(text: string): void {
    if (!this.jsonEnabled()) this.log(text);
  }

  override async catch(err: Error & { oclif?: { exit?: number } }): Promise<void> {
    const code = err instanceof ApiError || err instanceof TransferFailedError ? exitCodeOf(err) : err.oclif?.exit ?? ExitCode.other;
    process.stderr.write(errorLine(err.message, this.jsonEnabled()));
    process.exitCode = code;
  }
}
