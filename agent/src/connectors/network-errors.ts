/**
 * What Node's network and TLS error codes mean, worded for a connector's error messages. One
 * table for every connector; each names what should be listening (`an SSH server`) and, where
 * it speaks TLS, what to change when the server turns out to be plain (`set options.secure to
 * false`). Connectors override single entries where they know more.
 */
export function networkMessages(server: string, tlsPlain?: string): Record<string, string> {
  const base: Record<string, string> = {
    ENOTFOUND: 'cannot resolve the host name',
    EAI_AGAIN: 'cannot resolve the host name (DNS did not answer)',
    ECONNREFUSED: `connection refused (is ${server} listening on that port?)`,
    ETIMEDOUT: 'timed out',
    EHOSTUNREACH: 'host unreachable',
    ENETUNREACH: 'network unreachable',
    ECONNRESET: 'connection reset by the server',
    EPIPE: 'connection closed by the server',
    ECONNABORTED: 'connection aborted',
  };
  if (tlsPlain === undefined) return base;
  const plain = `TLS handshake failed (is the server plain HTTP? ${tlsPlain})`;
  return {
    ...base,
    EPROTO: plain,
    ERR_SSL_WRONG_VERSION_NUMBER: plain,
    ERR_SSL_PACKET_LENGTH_TOO_LONG: plain,
    DEPTH_ZERO_SELF_SIGNED_CERT: 'the server presented a self-signed certificate',
    SELF_SIGNED_CERT_IN_CHAIN: 'the server certificate chain is self-signed',
    UNABLE_TO_VERIFY_LEAF_SIGNATURE: 'the server certificate cannot be verified',
    CERT_HAS_EXPIRED: 'the server certificate has expired',
    ERR_TLS_CERT_ALTNAME_INVALID: 'the server certificate does not name this host',
  };
}
