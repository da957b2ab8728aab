import { createHash, timingSafeEqual } from 'node:crypto';
import { ConnectorError } from '../types.js';
import type { OnedriveConfig } from './onedrive.config.js';
import { SCOPE } from './onedrive.config.js';
import { endpointOf, type HttpsClient } from './onedrive.http.js';
import { requestError } from './onedrive.errors.js';

/** An access token is renewed this long before the expiry the token endpoint gave. */
const RENEW_BEFORE_MS = 5 * 60_000;
/** Refresh tokens of one lineage remembered as replaced, so a connector built from an older copy of the settings uses the newest. */
const MAX_REPLACED = 32;

/** The tokens of one connection, shared by every connector of it in this process. */
interface TokenState {
  /** SHA-256 of client id, secret, tenant and token URL: new app credentials start a new state. */
  app: Buffer;
  refreshToken: string;
  /** SHA-256 of the refresh tokens this one replaced. */
  replaced: Buffer[];
  access?: { token: string; expiresAt: number };
  /** The grant in flight: concurrent callers wait for it instead of spending the refresh token twice. */
  refreshing?: Promise<string>;
}

/**
 * One token state per connection id in the process: concurrent jobs on one connection must not
 * race each other's refresh-token rotations (with strict rotation, the second grant with the
 * token the first one just spent would fail). Module scope on purpose: connectors come and go
 * per job, the tokens outlive them.
 */
const STATES = new Map<string, TokenState>();

const sha256 = (value: string) => createHash('sha256').update(value).digest();

/** The token endpoint's answer (Microsoft identity platform, OAuth 2.0 refresh token grant). */
interface TokenAnswer {
  access_token?: string;
  refresh_token?: string;
  expires_in?: number | string;
  error?: string;
  error_description?: string;
}

/**
 * Access tokens for one connector from the refresh-token grant
 * (POST https://{login_host}/{tenant}/oauth2/v2.0/token), cached until shortly before they expire
 * and shared per connection. When the grant returns a new refresh token it replaces the old one
 * here at once, and `rotated` reports it so that the control plane stores it.
 */
export class TokenSource {
  private readonly state: TokenState;

  constructor(
    private readonly config: OnedriveConfig,
    private readonly http: HttpsClient,
    private readonly rotated?: (refreshToken: string, spent: string) => void,
  ) {
    const app = sha256([config.clientId, config.clientSecret, config.tokenUrl].join('\n'));
    const existing = STATES.get(config.connectionId);
    const given = sha256(config.refreshToken);
    const known = existing && timingSafeEqual(existing.app, app)
      && (timingSafeEqual(sha256(existing.refreshToken), given) || existing.replaced.some((h) => timingSafeEqual(h, given)));
    if (existing && known) this.state = existing;
    else {
      // A connection seen first, or whose credentials were edited since: start from the settings.
      this.state = { app, refreshToken: config.refreshToken, replaced: [] };
      STATES.set(config.connectionId, this.state);
    }
  }

  /** A valid access token, from the cache or a new grant. */
  async get(signal?: AbortSignal): Promise<string> {
    const access = this.state.access;
    if (access && access.expiresAt - RENEW_BEFORE_MS > Date.now()) return access.token;
    return this.refresh(signal);
  }

  /** Forgets `token` after Graph refused it (401), so the next `get` asks for a new one. */
  invalidate(token: string): void {
    if (this.state.access?.token === token) this.state.access = undefined;
  }

  private refresh(signal?: AbortSignal): Promise<string> {
    // Not the caller's signal: the grant is shared, one caller's abort must not fail the others.
    this.state.refreshing ??= this.grant().finally(() => (this.state.refreshing = undefined));
    if (!signal) return this.state.refreshing;
    return new Promise<string>((resolve, reject) => {
      const onAbort = () => reject(requestError(signal.reason, this.ctx(), signal));
      if (signal.aborted) return onAbort();
      signal.addEventListener('abort', onAbort, { once: true });
      this.state.refreshing!.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
    });
  }

  private async grant(): Promise<string> {
    const spent = this.state.refreshToken;
    const form = new URLSearchParams({
      client_id: this.config.clientId,
      client_secret: this.config.clientSecret,
      grant_type: 'refresh_token',
      refresh_token: spent,
      scope: SCOPE,
    }).toString();
    const ctx = this.ctx();
    const res = await this.http.sendRetrying({
      method: 'POST', url: this.config.tokenUrl, ctx, body: form,
      headers: { 'Content-Type': 'application/x-www-form-urlencoded', Accept: 'application/json' },
    });
    let answer: TokenAnswer = {};
    const text = await res.text();
    try {
      answer = JSON.parse(text) as TokenAnswer;
    } catch {
      // Not JSON (a proxy's error page): the status decides below.
    }
    if (res.status !== 200 || typeof answer.access_token !== 'string') throw this.grantError(res.status, answer);
    const expiresIn = Number(answer.expires_in);
    this.state.access = { token: answer.access_token, expiresAt: Date.now() + (Number.isFinite(expiresIn) && expiresIn > 0 ? expiresIn : 3600) * 1000 };
    if (typeof answer.refresh_token === 'string' && answer.refresh_token !== '' && answer.refresh_token !== spent) {
      this.state.replaced = [sha256(spent), ...this.state.replaced].slice(0, MAX_REPLACED);
      this.state.refreshToken = answer.refresh_token;
      this.rotated?.(answer.refresh_token, spent);
    }
    return answer.access_token;
  }

  /**
   * AADSTS errors as the user can act on them. The description is quoted only up to its first
   * sentence with its AADSTS number (it never holds the secret; trace and correlation ids are cut).
   */
  private grantError(status: number, answer: TokenAnswer): ConnectorError {
    const where = `token request to ${this.config.loginEndpoint}`;
    const aadsts = /AADSTS\d+:[^.\r\n]*\.?/.exec(answer.error_description ?? '')?.[0];
    const said = [answer.error, aadsts].filter(Boolean).join(': ');
    if (status === 429 || status >= 500) {
      return new ConnectorError('TRANSIENT', `${where}: the Microsoft identity platform answered ${status}${said ? ` (${said})` : ''}`);
    }
    const why = answer.error === 'invalid_client' ? 'the client id or client secret is not accepted'
      : answer.error === 'invalid_grant' ? 'the refresh token is expired, revoked or not for this client: sign in again and store the new refresh token'
      : answer.error === 'unauthorized_client' ? 'the application is not allowed to use this grant'
      : answer.error === 'interaction_required' || answer.error === 'consent_required' ? 'the user must sign in again (consent or MFA is required)'
      : /AADSTS90002|AADSTS900023/.test(aadsts ?? '') ? 'the tenant does not exist'
      : `the Microsoft identity platform refused the refresh token grant (HTTP ${status})`;
    return new ConnectorError('AUTH', `${where}: ${why}${said ? ` (${said})` : ''}`);
  }

  private ctx() {
    return { op: 'sign-in', path: '', endpoint: endpointOf(this.config.tokenUrl) };
  }
}
