import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * Shared Key authorization of the Azure Storage File service, as Microsoft's "Authorize with
 * Shared Key" describes it (the scheme of version 2009-09-19 and later; for the File service,
 * 2014-02-14 and later), for the Azure Files fake. Pure functions: the fake and its fidelity tests
 * use the same code.
 */

/** The request as the signature sees it: method, raw request target (path and query as sent), headers (names lower-case). */
export interface SignedRequest {
  method: string;
  /** The request target exactly as received, e.g. `/acct/share/dir%20a/f.txt?comp=range`. */
  target: string;
  headers: Readonly<Record<string, string | string[] | undefined>>;
}

/** The standard headers of the string-to-sign, in the documented order. */
const STANDARD = [
  'content-encoding',
  'content-language',
  'content-length',
  'content-md5',
  'content-type',
  'date',
  'if-modified-since',
  'if-match',
  'if-none-match',
  'if-unmodified-since',
  'range',
] as const;

/**
 * StringToSign = VERB + "\n" + Content-Encoding + "\n" + Content-Language + "\n" + Content-Length
 * + "\n" + Content-MD5 + "\n" + Content-Type + "\n" + Date + "\n" + If-Modified-Since + "\n" +
 * If-Match + "\n" + If-None-Match + "\n" + If-Unmodified-Since + "\n" + Range + "\n" +
 * CanonicalizedHeaders + CanonicalizedResource. Content-Length is the empty string when zero
 * (version 2015-02-21 and later, which is every version the fake accepts).
 */
export function stringToSign(account: string, req: SignedRequest): string {
  const standard = STANDARD.map((name) => {
    const value = header(req.headers, name);
    return name === 'content-length' && value === '0' ? '' : value;
  });
  return [req.method.toUpperCase(), ...standard].join('\n') + '\n' + canonicalizedHeaders(req.headers) + canonicalizedResource(account, req.target);
}

/**
 * Every `x-ms-` header, name lower-case, sorted by name, each once, its value with linear white
 * space (outside quoted strings) replaced by one space and trimmed, `name:value\n` each.
 */
export function canonicalizedHeaders(headers: SignedRequest['headers']): string {
  const names = Object.keys(headers).map((n) => n.toLowerCase()).filter((n) => n.startsWith('x-ms-'));
  return [...new Set(names)].sort(headerOrder).map((name) => `${name}:${unfold(header(headers, name))}\n`).join('');
}

/**
 * The order of canonicalized header names. The documentation says "lexicographically" and warns
 * that this "may not always coincide with conventional alphabetical ordering": the service sorts
 * as .NET's en-US culture does, where a hyphen weighs nothing until the names are otherwise equal
 * (the SDKs imitate it: @azure/storage-common SharedKeyComparator). For lower-case header names
 * that is: compare without hyphens, then as they are.
 */
export function headerOrder(a: string, b: string): number {
  const pa = a.replace(/-/g, '');
  const pb = b.replace(/-/g, '');
  if (pa !== pb) return pa < pb ? -1 : 1;
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * "/" + account + the encoded URI path as sent, then each query parameter: name lower-case and
 * URL-decoded, sorted by name, `\nname:value`, several values of one name sorted and joined by ','.
 */
export function canonicalizedResource(account: string, target: string): string {
  const q = target.indexOf('?');
  const path = q < 0 ? target : target.slice(0, q);
  const query = q < 0 ? '' : target.slice(q + 1);
  const params = new Map<string, string[]>();
  for (const part of query.split('&')) {
    if (part === '') continue;
    const eq = part.indexOf('=');
    const name = decode(eq < 0 ? part : part.slice(0, eq)).toLowerCase();
    const value = eq < 0 ? '' : decode(part.slice(eq + 1));
    params.set(name, [...(params.get(name) ?? []), value]);
  }
  const names = [...params.keys()].sort();
  return `/${account}${path === '' ? '/' : path}` + names.map((n) => `\n${n}:${params.get(n)!.sort().join(',')}`).join('');
}

/** `SharedKey <account>:<base64 HMAC-SHA256 of the string-to-sign under the base64-decoded key>`. */
export function sign(account: string, key: string, req: SignedRequest): string {
  return createHmac('sha256', Buffer.from(key, 'base64')).update(stringToSign(account, req), 'utf8').digest('base64');
}

/** The outcome of checking a request's Authorization header. */
export type Verdict = { ok: true } | { ok: false; detail: string };

/**
 * Checks `Authorization: SharedKey <account>:<signature>` against the string-to-sign computed
 * here, comparing the MACs in constant time. The failure detail quotes the string the fake used,
 * as the service's AuthenticationErrorDetail does (it holds no secret).
 */
export function verify(account: string, key: string, req: SignedRequest): Verdict {
  const authorization = header(req.headers, 'authorization');
  const match = /^SharedKey ([^:\s]+):(\S+)$/.exec(authorization);
  if (!match) return { ok: false, detail: 'The Authorization header is not of the form SharedKey <account>:<signature>.' };
  const [, claimed, signature] = match as unknown as [string, string, string];
  const toSign = stringToSign(account, req);
  const expected = createHmac('sha256', Buffer.from(key, 'base64')).update(toSign, 'utf8').digest();
  const given = Buffer.from(signature, 'base64');
  const same = given.length === expected.length && timingSafeEqual(given, expected);
  if (claimed === account && same) return { ok: true };
  return { ok: false, detail: `The MAC signature found in the HTTP request '${signature}' is not the same as any computed signature. Server used following string to sign: '${toSign}'.` };
}

function header(headers: SignedRequest['headers'], name: string): string {
  const value = headers[name];
  return Array.isArray(value) ? value.join(',') : (value ?? '');
}

/** Linear white space to one space, except inside quoted strings; trimmed. */
function unfold(value: string): string {
  let out = '';
  let quoted = false;
  let space = false;
  for (const ch of value.trim()) {
    if (ch === '"') quoted = !quoted;
    if (!quoted && (ch === ' ' || ch === '\t' || ch === '\r' || ch === '\n')) {
      space = true;
      continue;
    }
    if (space) out += ' ';
    space = false;
    out += ch;
  }
  return out;
}

function decode(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}
