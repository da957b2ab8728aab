/**
 * An error answer of the fake, in the shape of Microsoft's "Status and error codes" for Azure
 * Storage: the status, the `x-ms-error-code` header, and an XML body
 * `<Error><Code>…</Code><Message>…</Message>…</Error>` (none for HEAD).
 */
export class FakeError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    /** Further elements of the body, e.g. `{HeaderName: 'x-ms-version'}` or `{AuthenticationErrorDetail: '…'}`. */
    readonly details: Record<string, string> = {},
  ) {
    super(message);
  }
}

/** The XML error body; the message ends with the request id and time, as the service's does. */
export function errorXml(err: FakeError, requestId: string, now: Date): string {
  const details = Object.entries(err.details).map(([k, v]) => `<${k}>${xmlEscape(v)}</${k}>`).join('');
  return `<?xml version="1.0" encoding="utf-8"?><Error><Code>${err.code}</Code><Message>${xmlEscape(`${err.message}\nRequestId:${requestId}\nTime:${now.toISOString().replace('Z', '0000Z')}`)}</Message>${details}</Error>`;
}

export function xmlEscape(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&apos;' })[c]!);
}
