import { BlobSASPermissions, SASProtocol, type BlobClient } from '@azure/storage-blob';
import { errorName, type RestErrorLike } from '../azure/azure.errors.js';
import { mtimeMetadata } from '../mtime-metadata.js';
import { ConnectorError, type Entry, type WriteResult } from '../types.js';
import type { BlobTarget } from './blob.config.js';
import { sameAuthority } from '../authority.js';

/** The largest source Copy Blob From URL copies: Azure refuses a larger one (409). */
export const COPY_FROM_URL_MAX_BYTES = 256 * 1024 * 1024;
/**
 * How long the source's read SAS is valid: 15 minutes, the clock skew Azure itself tolerates on a
 * Shared Key request (an agent whose clock is further off cannot sign the copy request either), and
 * long enough for the SDK's tries of one synchronous copy. Short, because the service may keep the
 * copy source URL, SAS included, in the destination's `x-ms-copy-source` property (Azurite does;
 * Azure strips `sig` in some regions only): whoever may read the copy's properties can then read that
 * one source blob, whose bytes the copy holds, until it expires.
 */
const SOURCE_SAS_MS = 15 * 60 * 1000;

/** Two targets reaching the same account with the same key (BlobTarget.account); never a SAS connection. */
export function sameAccount(a: BlobTarget, b: BlobTarget): boolean {
  return sameAuthority(a.account, b.account);
}

/**
 * What a server-side copy of `entry` checks the copy against: its Content-MD5 and its ETag. Null
 * (the bytes move) where the service could not be made to check it: no Content-MD5, no ETag, or
 * a source larger than one Copy Blob From URL copies.
 */
export function copyableBlob(entry: Entry): { md5: Buffer; etag: string } | null {
  if (entry.kind !== 'file' || entry.size > COPY_FROM_URL_MAX_BYTES || !entry.etag) return null;
  if (entry.checksum?.algorithm !== 'md5' || !/^[0-9a-f]{32}$/i.test(entry.checksum.value)) return null;
  return { md5: Buffer.from(entry.checksum.value, 'hex'), etag: entry.etag };
}

/**
 * The source blob's URL with a service SAS of its own: read only, that one blob, 15 minutes. Copy
 * Blob From URL reads its source as an anonymous client would: the destination request's Shared
 * Key signature does not authorize it, even inside one account; this SAS, signed with the key the
 * source connection holds, grants nothing that connection could not do.
 */
export async function sourceUrl(from: BlobClient): Promise<string> {
  const https = new URL(from.url).protocol === 'https:';
  return from.generateSasUrl({
    permissions: BlobSASPermissions.parse('r'),
    expiresOn: new Date(Date.now() + SOURCE_SAS_MS),
    protocol: https ? SASProtocol.Https : SASProtocol.HttpsAndHttp,
  });
}

/**
 * Copies one blob inside the account with Copy Blob From URL (docs/connectors.md "Server-side
 * copies"): synchronous, so the destination appears only complete, in one request, or not at all.
 * The request names the listed version (`x-ms-source-if-match`: a source rewritten since the
 * listing fails with 412) and the listed Content-MD5 (`x-ms-source-content-md5`: Azure hashes the
 * bytes it copies and fails a mismatch with 400), and replaces the metadata with the kept
 * modification time, as a write does. Then the destination's properties must show the listed size
 * and Content-MD5 (the service copies the property), and the service's echo of the MD5, when it
 * sends one, the listed one; a copy that does not is removed. Null, before any request, where the
 * copy could not be checked so (`copyableBlob`).
 */
export async function copyBlob(
  to: BlobClient, from: BlobClient, entry: Entry, options: { modifiedAt?: () => Promise<Date | undefined>; signal?: AbortSignal },
): Promise<WriteResult | null> {
  const source = copyableBlob(entry);
  if (!source) return null;
  const { signal } = options;
  // Asked only now that the copy goes ahead: it may cost a stat of the source.
  const modifiedAt = await options.modifiedAt?.();
  // Without a time to keep, no metadata header: the service then copies the source's metadata.
  const metadata = modifiedAt ? mtimeMetadata(modifiedAt, 'rfc3339-nano9') : undefined;
  const md5Hex = source.md5.toString('hex');
  const copied = await to.syncCopyFromURL(await sourceUrl(from), {
    abortSignal: signal, metadata, sourceConditions: { ifMatch: source.etag }, sourceContentMD5: source.md5,
  }).catch((err: unknown) => {
    throw refusal(err, source.etag) ?? err;
  });
  const echoed = copied.contentMD5 ? Buffer.from(copied.contentMD5).toString('hex') : undefined;
  let wrong = copied.copyStatus !== undefined && copied.copyStatus !== 'success' ? `copy status ${copied.copyStatus}` : undefined;
  if (!wrong && echoed !== undefined && echoed !== md5Hex) wrong = `the service hashed the bytes it copied to ${echoed}`;
  if (!wrong) {
    // The copy's own version (If-Match its ETag): a later writer's blob is neither judged nor removed.
    const props = await to.getProperties({ abortSignal: signal, conditions: copied.etag ? { ifMatch: copied.etag } : undefined });
    const stored = props.contentMD5 ? Buffer.from(props.contentMD5).toString('hex') : '(none)';
    if (props.contentLength !== entry.size) wrong = `the copy holds ${props.contentLength} bytes`;
    else if (stored !== md5Hex) wrong = `the copy's Content-MD5 is ${stored}`;
  }
  if (wrong) {
    // No signal: the removal must also run after a cancel.
    await to.deleteIfExists({ conditions: copied.etag ? { ifMatch: copied.etag } : undefined }).catch(() => undefined);
    throw new ConnectorError('TRANSIENT', `server-side copy: ${wrong}, not the source's ${entry.size} bytes of MD5 ${md5Hex}; the copy was removed`);
  }
  return { size: entry.size, checksum: { algorithm: 'md5', value: md5Hex }, storeVerified: 'server-copy-md5' };
}

/** The errors of the copy request that say something about the source as listed; undefined for the others. */
function refusal(err: unknown, etag: string): ConnectorError | undefined {
  const e = (err ?? {}) as RestErrorLike;
  const name = errorName(e);
  // Azure answers SourceConditionNotMet; Azurite ConditionNotMet (no destination condition is sent).
  if (e.statusCode === 412 && (name === 'SourceConditionNotMet' || name === 'ConditionNotMet')) {
    return new ConnectorError('CONFLICT', `source changed since it was listed: its ETag is no longer ${etag}`, { cause: err });
  }
  // The source's bytes are not what its Content-MD5 property says: a copy by any means would
  // disagree with it, and another attempt would too.
  if (e.statusCode === 400 && /md5/i.test(name)) {
    return new ConnectorError('CONFLICT', "the source's bytes do not match its Content-MD5 property: the service refused the copy", { cause: err });
  }
  return undefined;
}
