import { createCipheriv, createDecipheriv, createHash, hkdfSync, randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';

/** What is stored for an encrypted value: AES-256-GCM under the master key named by `kid`. */
export interface Sealed {
  kid: string;
  iv: string;
  tag: string;
  data: string;
}

/** Key id: a public fingerprint of a master key, so ciphertexts name the key that sealed them. */
function keyId(key: Buffer): string {
  return createHash('sha256').update('xfer-master-key-id').update(key).digest('hex').slice(0, 16);
}

/**
 * Encrypts secrets (connection credentials) at rest. The first key seals; every key opens what
 * it sealed, which is how rotation works: new key active, old keys kept as retired until
 * `xfer-server rotate-keys` has resealed everything.
 */
export class Vault {
  private readonly keys: Map<string, Buffer>;
  readonly activeKid: string;

  constructor(private readonly masterKeys: Buffer[]) {
    if (masterKeys.length === 0) throw new Error('Vault needs at least one master key');
    this.keys = new Map(masterKeys.map((k) => [keyId(k), k]));
    this.activeKid = keyId(masterKeys[0]!);
  }

  seal(value: unknown): Sealed {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.keys.get(this.activeKid)!, iv);
    const data = Buffer.concat([cipher.update(JSON.stringify(value), 'utf8'), cipher.final()]);
    return { kid: this.activeKid, iv: iv.toString('base64'), tag: cipher.getAuthTag().toString('base64'), data: data.toString('base64') };
  }

  open<T = unknown>(sealed: Sealed): T {
    const key = this.keys.get(sealed.kid);
    if (!key) throw new Error(`Master key ${sealed.kid} is not configured: add it to XFER_RETIRED_MASTER_KEYS`);
    const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(sealed.iv, 'base64'));
    decipher.setAuthTag(Buffer.from(sealed.tag, 'base64'));
    const text = Buffer.concat([decipher.update(Buffer.from(sealed.data, 'base64')), decipher.final()]).toString('utf8');
    return JSON.parse(text) as T;
  }

  /** A key for another purpose (session signing), derived so that one secret is all an operator keeps. */
  deriveKey(purpose: string): Buffer {
    return Buffer.from(hkdfSync('sha256', this.masterKeys[0]!, Buffer.alloc(0), `xfer:${purpose}`, 32));
  }
}

/**
 * The master key file used when XFER_MASTER_KEY is not set: created once with 32 random
 * bytes, mode 0600, beside the data it protects.
 */
export function loadOrCreateKeyFile(path: string): Buffer {
  if (existsSync(path)) {
    const key = Buffer.from(readFileSync(path, 'utf8').trim(), 'base64');
    if (key.length !== 32) throw new Error(`${path} does not hold a 32-byte base64 master key`);
    return key;
  }
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  const key = randomBytes(32);
  writeFileSync(path, key.toString('base64') + '\n', { mode: 0o600, flag: 'wx' });
  chmodSync(path, 0o600);
  return key;
}
