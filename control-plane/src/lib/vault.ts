import { createCipheriv, createDecipheriv, createHash, hkdfSync, randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

/**
 * What is stored for an encrypted value: AES-256-GCM under the master key named by `kid`.
 * `v` is the format: 2 (bound: the additional data names the account, the owning record and the
 * field, so a ciphertext copied elsewhere does not open); absent (format 1, before binding: opens
 * without additional data until `xfer-server rotate-keys` seals it again as format 2).
 */
export interface Sealed {
  v?: number;
  kid: string;
  iv: string;
  tag: string;
  data: string;
}

/** Where a sealed value belongs: the owning account, the owning record, and what it is there. */
export interface SealBinding {
  /** Kind of value, e.g. `connection.credentials`; the same for fields one value moves between. */
  purpose: string;
  accountId: string | { toString(): string };
  recordId: string | { toString(): string };
}

export const SEALED_FORMAT = 2;

/** Key id: a public fingerprint of a master key, so ciphertexts name the key that sealed them. */
export function keyId(key: Buffer): string {
  return createHash('sha256').update('xfer-master-key-id').update(key).digest('hex').slice(0, 16);
}

function additionalData(b: SealBinding): Buffer {
  return Buffer.from(JSON.stringify(['xfer-sealed', SEALED_FORMAT, b.purpose, String(b.accountId), String(b.recordId)]), 'utf8');
}

/**
 * Where a vault without XFER_MASTER_KEY gets its keys: the key files of the data dir, which
 * `xfer-server rotate-keys --new-key` changes under running instances.
 */
export interface KeySource {
  /** Every key, the active one first. */
  load(): Buffer[];
  /** A cheap fingerprint of the active key's file (inode, size, mtime); null while it is absent. */
  version(): string | null;
}

/** How often, at most, a vault on key files looks whether the active key file changed. */
export const ACTIVE_KEY_CHECK_MS = 1000;

/**
 * Encrypts secrets (connection credentials, webhook secrets, MFA secrets) at rest. The first key
 * seals; every key opens what it sealed, which is how rotation works: new key active, old keys
 * kept as retired until `xfer-server rotate-keys` has resealed everything.
 */
export class Vault {
  private readonly keys: Map<string, Buffer>;
  private active: string;
  private readonly listeners: ((kid: string) => void)[] = [];

  /**
   * `source`, when given (key files), is read again when a value names a key this vault does not
   * know (another instance rotated the key files of a shared data dir meanwhile), and when the
   * active key file changed: `sourceVersion` is its fingerprint when `masterKeys` were read.
   */
  constructor(masterKeys: Buffer[], private readonly source?: KeySource, private sourceVersion: string | null = null) {
    if (masterKeys.length === 0) throw new Error('Vault needs at least one master key');
    this.keys = new Map(masterKeys.map((k) => [keyId(k), k]));
    this.active = keyId(masterKeys[0]!);
  }

  /**
   * The key that seals. With key files it follows master.key: a running instance seals under a
   * new key within ACTIVE_KEY_CHECK_MS of `rotate-keys --new-key`, so no value is sealed under a
   * key about to be dropped (docs/security.md "Key rotation"). With XFER_MASTER_KEY it changes
   * only by a restart.
   */
  get activeKid(): string {
    this.followActiveKeyFile();
    return this.active;
  }

  /** Calls `fn` with the new key id whenever the active key changes (key files only). */
  onActiveKeyChange(fn: (kid: string) => void): void {
    this.listeners.push(fn);
  }

  private lastReload = 0;
  private lastActiveCheck = 0;

  private keyFor(kid: string): Buffer | undefined {
    // At most once a second: a value under a key nobody has must not make every open read files.
    if (!this.keys.has(kid) && this.source && Date.now() - this.lastReload >= 1000) {
      this.lastReload = Date.now();
      this.learn(this.source.load());
    }
    return this.keys.get(kid);
  }

  private learn(keys: Buffer[]): void {
    for (const k of keys) if (!this.keys.has(keyId(k))) this.keys.set(keyId(k), k);
  }

  /**
   * At most once per ACTIVE_KEY_CHECK_MS, one stat of master.key (no read, so sealing stays
   * cheap); the files are read only when it changed. Keys once known are kept: values sealed
   * under them still open. A file being replaced (absent, unreadable) leaves the active key as it
   * is until the next check.
   */
  private followActiveKeyFile(): void {
    if (!this.source) return;
    const now = Date.now();
    if (now - this.lastActiveCheck < ACTIVE_KEY_CHECK_MS) return;
    this.lastActiveCheck = now;
    let keys: Buffer[];
    let version: string | null;
    try {
      version = this.source.version();
      if (version === null || version === this.sourceVersion) return;
      keys = this.source.load();
    } catch {
      return;
    }
    this.learn(keys);
    this.sourceVersion = version;
    const kid = keyId(keys[0]!);
    if (kid === this.active) return;
    this.active = kid;
    for (const fn of this.listeners) fn(kid);
  }

  seal(value: unknown, binding: SealBinding): Sealed {
    const iv = randomBytes(12);
    const kid = this.activeKid;
    const cipher = createCipheriv('aes-256-gcm', this.keys.get(kid)!, iv);
    cipher.setAAD(additionalData(binding));
    const data = Buffer.concat([cipher.update(JSON.stringify(value), 'utf8'), cipher.final()]);
    return { v: SEALED_FORMAT, kid, iv: iv.toString('base64'), tag: cipher.getAuthTag().toString('base64'), data: data.toString('base64') };
  }

  /** Throws when the key is unknown, or the value was altered or does not belong to `binding`. */
  open<T = unknown>(sealed: Sealed, binding: SealBinding): T {
    const key = this.keyFor(sealed.kid);
    if (!key) throw new Error(`Master key ${sealed.kid} is not configured: add it to XFER_RETIRED_MASTER_KEYS`);
    if (sealed.v !== undefined && sealed.v !== null && sealed.v !== SEALED_FORMAT) throw new Error(`Sealed value format ${sealed.v} is not known`);
    const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(sealed.iv, 'base64'));
    if (sealed.v === SEALED_FORMAT) decipher.setAAD(additionalData(binding));
    decipher.setAuthTag(Buffer.from(sealed.tag, 'base64'));
    let text: string;
    try {
      text = Buffer.concat([decipher.update(Buffer.from(sealed.data, 'base64')), decipher.final()]).toString('utf8');
    } catch {
      // Same words for a forged tag and a row moved to another record: neither says more.
      throw new Error(`A sealed ${binding.purpose} value does not open for this record (altered, or copied from another record or account)`);
    }
    return JSON.parse(text) as T;
  }

  /** Whether `sealed` should be sealed again: under a retired key, or in the unbound format 1. */
  isStale(sealed: Sealed): boolean {
    return sealed.kid !== this.activeKid || sealed.v !== SEALED_FORMAT;
  }

  /**
   * Keys for `purpose` derived (HKDF-SHA256) from each configured master key, the active key's
   * first: secrets every instance of an installation shares without storing them (the relay
   * peer links' HMAC key, docs/security.md "Relay peer links"). Sign with the first, accept any.
   */
  derivedKeys(purpose: string): Buffer[] {
    const active = this.keys.get(this.active)!;
    const others = [...this.keys.values()].filter((k) => k !== active);
    return [active, ...others].map((k) => Buffer.from(hkdfSync('sha256', k, Buffer.alloc(0), `xfer ${purpose}`, 32)));
  }

  /** Whether the key that sealed `sealed` is configured. */
  canOpen(sealed: Sealed): boolean {
    return this.keyFor(sealed.kid) !== undefined;
  }
}

/**
 * The master key file used when XFER_MASTER_KEY is not set: created once with 32 random bytes,
 * mode 0600, beside the data it protects. Two
 * instances starting at once on one data dir agree: the second one's exclusive create fails and
 * it reads the first one's key.
 */
export function loadOrCreateKeyFile(path: string): Buffer {
  const read = () => {
    const key = Buffer.from(readFileSync(path, 'utf8').trim(), 'base64');
    if (key.length !== 32) throw new Error(`${path} does not hold a 32-byte base64 key`);
    return key;
  };
  if (existsSync(path)) return read();
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  const key = randomBytes(32);
  try {
    writeFileSync(path, key.toString('base64') + '\n', { mode: 0o600, flag: 'wx' });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return read();
    throw err;
  }
  chmodSync(path, 0o600);
  return key;
}

/** Key files of a data dir without XFER_MASTER_KEY: the active key, and the retired ones one per line. */
export const keyFiles = (dataDir: string) => ({ active: join(dataDir, 'master.key'), retired: join(dataDir, 'retired-master.keys') });

/** The retired keys kept in `path` (base64, one per line; absent file: none). */
export function readRetiredKeyFile(path: string): Buffer[] {
  if (!existsSync(path)) return [];
  return readFileSync(path, 'utf8').split('\n').map((l) => l.trim()).filter((l) => l !== '').map((l, i) => {
    const key = Buffer.from(l, 'base64');
    if (key.length !== 32) throw new Error(`${path} line ${i + 1} does not hold a 32-byte base64 key`);
    return key;
  });
}

/**
 * The vault of a configuration: XFER_MASTER_KEY (+ XFER_RETIRED_MASTER_KEYS), else the key files
 * of the data dir, master.key created on first start and followed while running.
 */
export function vaultOf(config: { masterKeys: Buffer[] | null; dataDir: string }): Vault {
  if (config.masterKeys) return new Vault(config.masterKeys);
  const files = keyFiles(config.dataDir);
  const source: KeySource = {
    load: () => [loadOrCreateKeyFile(files.active), ...readRetiredKeyFile(files.retired)],
    version: () => {
      const st = statSync(files.active, { throwIfNoEntry: false });
      // --new-key replaces the file by a rename: a new inode, whatever the clock's resolution.
      return st ? `${st.ino}:${st.size}:${st.mtimeMs}` : null;
    },
  };
  // The fingerprint before the read: a change in between is seen at the first check.
  const version = source.version();
  return new Vault(source.load(), source, version);
}
