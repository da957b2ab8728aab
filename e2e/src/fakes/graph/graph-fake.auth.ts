import { randomBytes, randomUUID, timingSafeEqual, createHash } from 'node:crypto';

/** What the fake's token endpoint accepts: one app registration in one tenant. */
export interface FakeApp {
  tenant: string;
  clientId: string;
  clientSecret: string;
  /** The refresh token the fake starts with (as a consent flow would have issued it). */
  initialRefreshToken: string;
}

/** The token endpoint's answer: status and JSON body, as the Microsoft identity platform sends them. */
export interface TokenReply {
  status: number;
  body: Record<string, unknown>;
}

const ACCESS_TOKEN_SECONDS = 3599;
const SCOPE = 'https://graph.microsoft.com/Files.ReadWrite.All';

const equal = (a: string, b: string) => {
  const x = createHash('sha256').update(a).digest();
  const y = createHash('sha256').update(b).digest();
  return timingSafeEqual(x, y);
};

/**
 * The Microsoft identity platform's refresh-token grant (POST /{tenant}/oauth2/v2.0/token), as
 * documented: every grant answers a new access token and a new refresh token (rotation). As on
 * the real service the spent refresh token stays usable, unless it was minted `singleUse` (the
 * fake's admin endpoint), which proves a client stored and used the rotated one.
 */
export class FakeAuthority {
  private readonly refreshTokens = new Map<string, { singleUse: boolean }>();
  private readonly accessTokens = new Map<string, number>();
  /** Grants answered, for tests that count refreshes. */
  grants = 0;

  constructor(private readonly app: FakeApp) {
    this.refreshTokens.set(app.initialRefreshToken, { singleUse: false });
  }

  mintRefreshToken(singleUse: boolean): string {
    const token = `0.FAKE.${randomBytes(48).toString('base64url')}`;
    this.refreshTokens.set(token, { singleUse });
    return token;
  }

  /** Forgets every access token (as if they expired or were revoked): the next Graph request is 401. */
  revokeAccessTokens(): void {
    this.accessTokens.clear();
  }

  /** Revokes one refresh token. */
  revokeRefreshToken(token: string): void {
    this.refreshTokens.delete(token);
  }

  validAccessToken(header: string | undefined): 'ok' | 'missing' | 'invalid' {
    const match = /^Bearer (\S+)$/.exec(header ?? '');
    if (!match) return 'missing';
    const expires = this.accessTokens.get(match[1]!);
    return expires !== undefined && expires > Date.now() ? 'ok' : 'invalid';
  }

  grant(tenant: string, form: URLSearchParams): TokenReply {
    if (tenant !== this.app.tenant && tenant !== 'common' && tenant !== 'organizations') {
      return aadError(400, 'invalid_request', 90002, `Tenant '${tenant}' not found. Check to make sure you have the correct tenant ID and are signing into the correct cloud.`);
    }
    if (form.get('grant_type') !== 'refresh_token') {
      return aadError(400, 'unsupported_grant_type', 70003, 'The app requested an unsupported grant type.');
    }
    const clientId = form.get('client_id') ?? '';
    if (!equal(clientId, this.app.clientId)) {
      return aadError(400, 'unauthorized_client', 700016, `Application with identifier '${clientId}' was not found in the directory.`);
    }
    if (!equal(form.get('client_secret') ?? '', this.app.clientSecret)) {
      return aadError(401, 'invalid_client', 7000215, 'Invalid client secret provided. Ensure the secret being sent in the request is the client secret value, not the client secret ID, for a secret added to app.');
    }
    const presented = form.get('refresh_token') ?? '';
    const known = [...this.refreshTokens.entries()].find(([token]) => equal(token, presented));
    if (!known) {
      return aadError(400, 'invalid_grant', 70008, 'The provided authorization code or refresh token has expired due to inactivity. Send a new interactive authorization request for this user and resource.');
    }
    if (known[1].singleUse) this.refreshTokens.delete(known[0]);
    this.grants++;
    const accessToken = `eyFAKE.${randomBytes(32).toString('base64url')}`;
    this.accessTokens.set(accessToken, Date.now() + ACCESS_TOKEN_SECONDS * 1000);
    return {
      status: 200,
      body: {
        token_type: 'Bearer', scope: SCOPE, expires_in: ACCESS_TOKEN_SECONDS, ext_expires_in: ACCESS_TOKEN_SECONDS,
        access_token: accessToken,
        // Rotation: a new refresh token with every grant, single-use when the spent one was.
        refresh_token: this.mintRefreshToken(known[1].singleUse),
      },
    };
  }
}

/** An error of the token endpoint: `{error, error_description: "AADSTSnnn: ... Trace ID: ...", error_codes, ...}`. */
function aadError(status: number, error: string, code: number, text: string): TokenReply {
  const traceId = randomUUID();
  const correlationId = randomUUID();
  const timestamp = new Date().toISOString().replace('T', ' ').replace('Z', 'Z');
  return {
    status,
    body: {
      error,
      error_description: `AADSTS${code}: ${text} Trace ID: ${traceId} Correlation ID: ${correlationId} Timestamp: ${timestamp}`,
      error_codes: [code], timestamp, trace_id: traceId, correlation_id: correlationId,
    },
  };
}
