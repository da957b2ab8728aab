/** ssh2's cipher module (untyped): only the flag the agent reads. */
declare module 'ssh2/lib/protocol/crypto.js' {
  const crypto: {
    /** True when ssh2's native `sshcrypto.node` loaded; false when its ciphers run in JavaScript. */
    bindingAvailable: boolean;
  };
  export default crypto;
}
