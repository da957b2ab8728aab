// ssh2 is CommonJS: its module.exports is the default export. The same module instance ssh2's
// transport uses (no exports map, so the deep path resolves to it, in the npm agent and the bundle).
import ssh2Crypto from 'ssh2/lib/protocol/crypto.js';

/**
 * Which code encrypts SSH packets: `native` when ssh2's `sshcrypto.node` loaded (built at `npm ci`
 * for the Node that ran it, embedded in the single-file agent), `javascript` when ssh2 fell back to
 * per-packet node:crypto calls, which make SFTP 3–5× slower (docs/agent.md, "Single-file binary").
 * The agent logs it at start.
 */
export const SSH_CRYPTO: 'native' | 'javascript' = ssh2Crypto.bindingAvailable ? 'native' : 'javascript';
