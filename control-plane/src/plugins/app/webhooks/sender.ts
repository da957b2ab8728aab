import { createHmac } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { request as httpsRequest } from 'node:https';
import { isIP, type LookupFunction, type Socket } from 'node:net';
import { type AddressPolicy, type Lookup, resolveSafeTarget, UnsafeUrlError } from '../../../lib/ssrf-guard.js';

/** The control plane's version, from its package.json (as many levels above this file in src/ as in dist/). */
const SERVER_VERSION: string = (JSON.parse(readFileSync(new URL('../../../../package.json', import.meta.url), 'utf8')) as { version: string }).version;

/** `User-Agent` of every delivery. */
export const WEBHOOK_USER_AGENT = `xfer-webhooks/${SERVER_VERSION}`;

/** Response bytes read (and thrown away) before the connection is cut: receivers answer small. */
const RESPONSE_CAP_BYTES = 16 * 1024;
/** Longest error string recorded for an attempt. */
const ERROR_MAX_CHARS = 300;

/**
 * The exact body of a delivery (api.md "Events", payload shape). `timestamp` is the event's time,
 * ISO 8601 UTC with milliseconds; the string is stored once, so every retry sends the same bytes.
 */
export function webhookBody(event: string, timestamp: Date, data: Record<string, unknown>): string {
  return JSON.stringify({ event, timestamp: timestamp.toISOString(), data });
}

/** `X-Webhook-Signature`: hex HMAC-SHA256 of the exact raw body with the webhook's secret. */
export function signBody(secret: string, body: string | Buffer): string {
  return createHmac('sha256', secret).update(body).digest('hex');
}

/**
 * `X-Webhook-Signature-Timestamped`: hex HMAC-SHA256 of `<delivery id>.<unix seconds>.<raw body>`,
 * which binds the delivery id and the send time to the body so a receiver can refuse replays
 * (docs/api.md "Webhook delivery").
 */
export function signTimestamped(secret: string, deliveryId: string, unixSeconds: number, body: string | Buffer): string {
  return createHmac('sha256', secret).update(`${deliveryId}.${unixSeconds}.`).update(body).digest('hex');
}

/** One request to send. */
export interface WebhookRequest {
  url: string;
  secret: string;
  event: string;
  deliveryId: string;
  body: string;
}

/** How to send it. */
export interface SendOptions {
  policy: AddressPolicy;
  /** Whole attempt: name resolution, connect, TLS, request and answer. */
  timeoutMs: number;
  /** Name resolution (the system's by default); called once per attempt, through the guard. */
  lookup?: Lookup;
  /** Trusted CAs replacing the system's (tests with a self-signed receiver). */
  ca?: string | Buffer;
}

/** What one attempt came to. Never throws: every failure is an `error` string. */
export interface SendResult {
  ok: boolean;
  statusCode: number | null;
  durationMs: number;
  error: string | null;
}

class TimeoutError extends Error {}
/** The socket reached an address other than the checked ones, or one the policy refuses. */
class PeerRefusedError extends Error {}

/**
 * Signs and POSTs one delivery: the URL is checked again (and its name resolved again) by
 * `resolveSafeTarget`, and the connection goes only to the addresses it checked (a `lookup` that
 * returns them, so no second DNS answer can swap in another address), with SNI and certificate
 * checks against the URL's host. The address actually connected to is checked once more before
 * any HTTP byte is written. 2xx is delivered; a 3xx is a failure (redirects are not followed).
 */
export async function sendWebhook(req: WebhookRequest, opts: SendOptions): Promise<SendResult> {
  const started = performance.now();
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(new TimeoutError(`timed out after ${opts.timeoutMs} ms`)), opts.timeoutMs);
  const done = (statusCode: number | null, error: string | null): SendResult =>
    ({ ok: error === null, statusCode, durationMs: Math.round(performance.now() - started), error });
  try {
    const target = await untilAborted(resolveSafeTarget(req.url, opts.policy, opts.lookup), abort.signal);
    const unixSeconds = Math.floor(Date.now() / 1000);
    const headers = {
      'content-type': 'application/json',
      'user-agent': WEBHOOK_USER_AGENT,
      'x-webhook-event': req.event,
      'x-webhook-delivery': req.deliveryId,
      'x-webhook-signature': signBody(req.secret, req.body),
      'x-webhook-timestamp': String(unixSeconds),
      'x-webhook-signature-timestamped': signTimestamped(req.secret, req.deliveryId, unixSeconds, req.body),
    };
    const status = await post(target, headers, req.body, opts, abort.signal);
    if (status >= 200 && status < 300) return done(status, null);
    if (status >= 300 && status < 400) return done(status, `redirects are not followed (HTTP ${status})`);
    return done(status, `HTTP ${status}`);
  } catch (err) {
    return done(null, describe(abort.signal.aborted ? abort.signal.reason : err));
  } finally {
    clearTimeout(timer);
  }
}

type Target = Awaited<ReturnType<typeof resolveSafeTarget>>;

/** One POST to the checked addresses; resolves with the status once the (capped) answer is read. */
function post(target: Target, headers: Record<string, string>, body: string, opts: SendOptions, signal: AbortSignal): Promise<number> {
  const { url, addresses } = target;
  const host = url.hostname.replace(/^\[|\]$/g, '');
  const checked = new Set(addresses.map((a) => unmapped(a.address)));
  // Connects go here instead of to DNS: only the addresses the guard checked are ever dialled.
  const lookup: LookupFunction = (_name, options, callback) => {
    if (options.all) callback(null, addresses);
    else callback(null, addresses[0]!.address, addresses[0]!.family);
  };
  return new Promise<number>((resolve, reject) => {
    const request = httpsRequest({
      host,
      port: url.port === '' ? 443 : Number(url.port),
      path: `${url.pathname}${url.search}`,
      method: 'POST',
      headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) },
      lookup,
      // SNI and the certificate check are against the URL's name (IP literals carry no SNI).
      servername: isIP(host) ? undefined : host,
      rejectUnauthorized: true,
      ...(opts.ca ? { ca: opts.ca } : {}),
      // A fresh connection per attempt: a pooled socket could lead to an address checked earlier.
      agent: false,
      signal,
    });
    const checkPeer = (socket: Socket) => {
      const remote = socket.remoteAddress;
      const refusal = !remote
        ? 'the connected address is unknown'
        : !checked.has(unmapped(remote))
          ? `connected to ${remote}, which is not an address that was checked`
          : opts.policy.refusal(remote);
      if (refusal) request.destroy(new PeerRefusedError(`refused: ${refusal}`));
    };
    request.on('socket', (socket: Socket) => {
      if (socket.connecting) socket.once('connect', () => checkPeer(socket));
      else checkPeer(socket);
    });
    request.on('response', (res) => {
      const status = res.statusCode ?? 0;
      let read = 0;
      res.on('data', (chunk: Buffer) => {
        read += chunk.length;
        if (read > RESPONSE_CAP_BYTES) {
          res.destroy();
          resolve(status);
        }
      });
      res.on('end', () => resolve(status));
      res.on('error', (err) => (read > RESPONSE_CAP_BYTES ? resolve(status) : reject(err)));
    });
    request.on('error', reject);
    request.end(body);
  });
}

/** Rejects with the abort reason as soon as `signal` aborts (the guard's lookup takes no signal). */
function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    if (signal.aborted) return onAbort();
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

/** `::ffff:127.0.0.1` and `127.0.0.1` are one address. */
function unmapped(address: string): string {
  const lower = address.toLowerCase();
  return lower.startsWith('::ffff:') && isIP(lower.slice(7)) === 4 ? lower.slice(7) : lower;
}

/** A short, secret-free reason for an attempt record. */
function describe(err: unknown): string {
  let message: string;
  if (err instanceof TimeoutError || err instanceof PeerRefusedError) message = err.message;
  else if (err instanceof UnsafeUrlError) message = err.kind === 'unresolved' ? `url ${err.message}` : `refused: url ${err.message}`;
  else if (err instanceof Error) {
    const code = (err as NodeJS.ErrnoException).code;
    message = code && !err.message.includes(code) ? `${code}: ${err.message}` : err.message;
  } else message = String(err);
  return message.length > ERROR_MAX_CHARS ? `${message.slice(0, ERROR_MAX_CHARS - 1)}…` : message;
}
