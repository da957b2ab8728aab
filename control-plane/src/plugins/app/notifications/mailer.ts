import { isIP } from 'node:net';
import nodemailer from 'nodemailer';
import { type AddressPolicy, type Lookup, resolveSafeHost, UnsafeUrlError } from '../../../lib/ssrf-guard.js';

/** The SMTP server of an account, with its password opened (only for the attempt that uses it). */
export interface SmtpTarget {
  host: string;
  port: number;
  /** true: implicit TLS; false: STARTTLS, required (never plaintext). */
  secure: boolean;
  username: string | null;
  password: string | null;
}

/** One message: every recipient in one envelope. */
export interface MailMessage {
  from: string;
  to: readonly string[];
  subject: string;
  text: string;
  /** The event it is about (`X-Xfer-Event`). */
  event: string;
  /** The notification's id (`X-Xfer-Notification`), the same on every retry. */
  notificationId: string;
}

/** TLS trust and name resolution of outgoing mail: the system's unless replaced (tests). */
export interface MailTransport {
  /** Trusted CAs replacing the system's (a self-signed test server). Never a way to turn verification off. */
  ca?: string | Buffer;
  lookup?: Lookup;
}

export interface MailOptions extends MailTransport {
  policy: AddressPolicy;
  /** The whole attempt: resolution, connect, TLS, the SMTP dialogue. */
  timeoutMs: number;
}

/** What one attempt came to. Never throws: every failure is an `error` string without credentials. */
export interface MailResult {
  ok: boolean;
  durationMs: number;
  error: string | null;
}

const ERROR_MAX_CHARS = 300;

class TimeoutError extends Error {}

/**
 * Sends one message over SMTP with TLS: implicit TLS when `secure`, else STARTTLS, which is
 * required (a server that does not offer it is a failure, never a plaintext fallback). The host
 * is checked like a webhook's (lib/ssrf-guard.ts `resolveSafeHost`) at every attempt and the
 * connection goes to exactly the address checked, with SNI and the certificate check against the
 * configured name. Authenticates when a username is given.
 */
export async function sendMail(smtp: SmtpTarget, message: MailMessage, opts: MailOptions): Promise<MailResult> {
  const started = performance.now();
  const done = (error: string | null): MailResult => ({ ok: error === null, durationMs: Math.round(performance.now() - started), error });
  let timer: NodeJS.Timeout | undefined;
  let transport: ReturnType<typeof nodemailer.createTransport> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new TimeoutError(`timed out after ${opts.timeoutMs} ms`)), opts.timeoutMs);
  });
  try {
    const { host, addresses } = await Promise.race([resolveSafeHost(smtp.host, opts.policy, opts.lookup), timeout]);
    transport = nodemailer.createTransport({
      host: addresses[0]!.address,
      port: smtp.port,
      secure: smtp.secure,
      requireTLS: !smtp.secure,
      ...(smtp.username ? { auth: { user: smtp.username, pass: smtp.password ?? '' } } : {}),
      tls: {
        // The certificate is checked against the configured name, not the address dialled.
        ...(isIP(host) ? {} : { servername: host }),
        rejectUnauthorized: true,
        minVersion: 'TLSv1.2',
        ...(opts.ca ? { ca: opts.ca } : {}),
      },
      connectionTimeout: opts.timeoutMs,
      greetingTimeout: opts.timeoutMs,
      socketTimeout: opts.timeoutMs,
      disableFileAccess: true,
      disableUrlAccess: true,
      logger: false,
    });
    await Promise.race([transport.sendMail({
      from: message.from,
      to: [...message.to],
      subject: message.subject,
      text: message.text,
      headers: { 'X-Xfer-Event': message.event, 'X-Xfer-Notification': message.notificationId, 'Auto-Submitted': 'auto-generated' },
    }), timeout]);
    return done(null);
  } catch (err) {
    return done(describe(err));
  } finally {
    clearTimeout(timer);
    transport?.close();
  }
}

/** A short, credential-free reason: the SMTP reply when there is one, else the error code and message. */
function describe(err: unknown): string {
  let message: string;
  if (err instanceof TimeoutError) message = err.message;
  else if (err instanceof UnsafeUrlError) message = `refused: ${err.message}`;
  else if (err instanceof Error) {
    const { code, response } = err as Error & { code?: string; response?: string };
    const text = response ?? err.message;
    // nodemailer's ETLS: the server refused STARTTLS or the TLS upgrade failed; never sent in plaintext.
    if (code === 'ETLS') message = `STARTTLS failed (TLS is required): ${text}`;
    else message = code && !text.includes(code) ? `${code}: ${text}` : text;
  } else message = String(err);
  message = message.replace(/\s+/g, ' ').trim();
  return message.length > ERROR_MAX_CHARS ? `${message.slice(0, ERROR_MAX_CHARS - 1)}…` : message;
}
