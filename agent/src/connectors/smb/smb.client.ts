import { createHash, randomBytes } from 'node:crypto';
import type { NetworkGuard } from '../network-guard.js';
import { smb3Kdf } from './smb.crypto.js';
import { ntlmAuthenticate, ntlmNegotiate, parseChallenge, parseSpnegoResponse, spnegoInit, spnegoResponse, type NtlmCredentials } from './smb.ntlm.js';
import { SmbConnection, SmbConnectionError } from './smb.connection.js';
import {
  Capability, Command, Dialect, FileAttribute, HASH_SHA512, InfoClass, NegotiateContext, OFFERED_DIALECTS, SecurityMode, SessionFlag, ShareFlag, SigningAlgorithmId,
  SmbStatusError, Status, fromFileTime, toFileTime,
} from './smb.protocol.js';

/** What the client needs to reach one share. */
export interface SmbTarget extends NtlmCredentials {
  host: string;
  port: number;
  share: string;
  timeoutMs: number;
  /** Dialects to offer; default OFFERED_DIALECTS (2.0.2 to 3.0.2). */
  dialects?: readonly number[];
  /** Checks the host and every address it resolves to (the agent's allow/deny lists); default: the default rules. */
  guard?: NetworkGuard;
}

/** An open file or directory: its handle and what CREATE said about it. */
export interface SmbHandle {
  fileId: Buffer;
  directory: boolean;
  size: number;
  modifiedAt?: Date;
}

export interface DirectoryEntry {
  name: string;
  directory: boolean;
  size: number;
  modifiedAt?: Date;
  reparse: boolean;
}

export interface CreateOptions {
  access: number;
  disposition: number;
  options?: number;
  share?: number;
  attributes?: number;
  signal?: AbortSignal;
}

/** The server refuses clients that do not encrypt: this client does not (see docs/connectors.md). */
export class SmbEncryptionRequired extends Error {}

/** Payload unit of one credit on SMB 2.1+ (MS-SMB2 3.1.5.2). */
const CREDIT_UNIT = 65_536;
/** Reads and writes above this gain nothing on loopback or LAN and cost memory per request in flight. */
const MAX_IO_BYTES = 1024 * 1024;

/**
 * An SMB2/3 session on one share over one connection: NEGOTIATE (2.0.2 to 3.0.2), NTLMv2 in
 * SPNEGO, signing with HMAC-SHA256 (2.x) or AES-CMAC (3.0.x) on every request once the session
 * key is known, one TREE_CONNECT; then the file operations the connector uses. Concurrent
 * operations share the connection (credits permitting).
 */
export class SmbClient {
  treeId = 0;
  maxRead = CREDIT_UNIT;
  maxWrite = CREDIT_UNIT;
  maxTransact = CREDIT_UNIT;
  signingRequired = false;
  /** SMB 3.1.1's pre-authentication integrity hash (SHA-512 over negotiate and session setup messages). */
  private preauth: Buffer = Buffer.alloc(64);
  private gmac = false;

  private constructor(readonly conn: SmbConnection) {}

  get closed(): boolean {
    return this.conn.closed;
  }

  get dialect(): number {
    return this.conn.dialect;
  }

  /** Connects, logs in and connects the share; rejects with socket errors, SmbStatusError or SmbConnectionError. */
  static async connect(target: SmbTarget, signal?: AbortSignal): Promise<SmbClient> {
    const conn = await SmbConnection.open(target.host, target.port, target.timeoutMs, signal, target.guard);
    const client = new SmbClient(conn);
    try {
      await client.negotiate(target.dialects ?? OFFERED_DIALECTS, signal);
      await client.sessionSetup(target, signal);
      await client.treeConnect(target, signal);
      return client;
    } catch (err) {
      conn.destroy();
      throw err;
    }
  }

  private async negotiate(offered: readonly number[], signal?: AbortSignal): Promise<void> {
    const fixed = Buffer.alloc(36 + offered.length * 2);
    fixed.writeUInt16LE(36, 0);
    fixed.writeUInt16LE(offered.length, 2);
    fixed.writeUInt16LE(SecurityMode.SIGNING_ENABLED, 4);
    fixed.writeUInt32LE(Capability.LARGE_MTU, 8);
    randomBytes(16).copy(fixed, 12);
    offered.forEach((d, i) => fixed.writeUInt16LE(d, 36 + i * 2));
    const parts: Buffer[] = [fixed];
    if (offered.includes(Dialect.SMB311)) {
      // Negotiate contexts start 8-byte aligned (from the header's start) after the dialects.
      const padding = pad8(64 + fixed.length);
      const preauth = Buffer.alloc(6 + 32);
      preauth.writeUInt16LE(1, 0);
      preauth.writeUInt16LE(32, 2);
      preauth.writeUInt16LE(HASH_SHA512, 4);
      randomBytes(32).copy(preauth, 6);
      const signing = Buffer.alloc(6);
      signing.writeUInt16LE(2, 0);
      signing.writeUInt16LE(SigningAlgorithmId.AES_GMAC, 2);
      signing.writeUInt16LE(SigningAlgorithmId.AES_CMAC, 4);
      const first = negotiateContext(NegotiateContext.PREAUTH_INTEGRITY, preauth);
      fixed.writeUInt32LE(64 + fixed.length + padding, 28);
      fixed.writeUInt16LE(2, 32);
      parts.push(Buffer.alloc(padding), first, Buffer.alloc(pad8(first.length)), negotiateContext(NegotiateContext.SIGNING, signing));
    }
    const { msg } = await this.conn.request(Command.NEGOTIATE, Buffer.concat(parts), { signal, sent: (m) => this.hashPreauth(m) });
    const dialect = msg.readUInt16LE(68);
    if (!offered.includes(dialect)) throw new SmbConnectionError(`the server chose dialect 0x${dialect.toString(16)}, which was not offered`, 'EPROTO');
    this.conn.dialect = dialect;
    if (dialect === Dialect.SMB311) {
      this.hashPreauth(msg);
      this.gmac = signingAlgorithmOf(msg) === SigningAlgorithmId.AES_GMAC;
    }
    this.signingRequired = (msg.readUInt16LE(66) & SecurityMode.SIGNING_REQUIRED) !== 0;
    const capabilities = msg.readUInt32LE(88);
    this.conn.largeMtu = dialect !== Dialect.SMB202 && (capabilities & Capability.LARGE_MTU) !== 0;
    const cap = (n: number) => (this.conn.largeMtu ? Math.min(n, MAX_IO_BYTES) : Math.min(n, CREDIT_UNIT));
    this.maxTransact = cap(msg.readUInt32LE(92));
    this.maxRead = cap(msg.readUInt32LE(96));
    this.maxWrite = cap(msg.readUInt32LE(100));
  }

  /** 3.1.1 only: folds a negotiate or session setup message into the pre-auth hash. */
  private hashPreauth(msg: Buffer): void {
    if (this.conn.dialect !== 0 && this.conn.dialect !== Dialect.SMB311) return;
    this.preauth = createHash('sha512').update(this.preauth).update(msg).digest();
  }

  private async sessionSetup(creds: NtlmCredentials, signal?: AbortSignal): Promise<void> {
    const sent = (m: Buffer) => this.hashPreauth(m);
    const first = await this.conn.request(Command.SESSION_SETUP, sessionSetupBody(spnegoInit(ntlmNegotiate())), { signal, sent, ok: [Status.MORE_PROCESSING_REQUIRED] });
    this.hashPreauth(first.msg);
    this.conn.sessionId = first.sessionId;
    const challengeToken = parseSpnegoResponse(securityBuffer(first.msg)).responseToken;
    if (!challengeToken) throw new SmbConnectionError('the server offered no NTLM challenge (does it accept NTLM logins?)', 'EPROTO');
    const { message, sessionKey } = ntlmAuthenticate(creds, parseChallenge(challengeToken));
    const key = sessionKey.subarray(0, 16);
    const dialect = this.conn.dialect;
    // Known before any answer to the last leg arrives, so that the server's signed final answer can be checked.
    const deriveKey = () => {
      if (dialect === Dialect.SMB311) {
        this.conn.signingKey = smb3Kdf(key, 'SMBSigningKey', this.preauth);
        this.conn.signingAlgorithm = this.gmac ? 'aes-gmac' : 'aes-cmac';
      } else if (dialect >= Dialect.SMB30) {
        this.conn.signingKey = smb3Kdf(key, 'SMB2AESCMAC', 'SmbSign');
        this.conn.signingAlgorithm = 'aes-cmac';
      } else {
        this.conn.signingKey = key;
        this.conn.signingAlgorithm = 'hmac-sha256';
      }
    };
    const last = await this.conn.request(Command.SESSION_SETUP, sessionSetupBody(spnegoResponse(message)), {
      signal,
      sent: (m) => {
        sent(m);
        deriveKey();
      },
    });
    const flags = last.msg.readUInt16LE(66);
    if (flags & (SessionFlag.IS_GUEST | SessionFlag.IS_NULL)) {
      // A guest session has no key to sign with and is not the user asked for.
      throw new SmbStatusError(Status.LOGON_FAILURE, Command.SESSION_SETUP);
    }
    if (flags & SessionFlag.ENCRYPT_DATA) throw new SmbEncryptionRequired('the server requires encryption for this session');
    this.conn.signAll = true;
  }

  private async treeConnect(target: SmbTarget, signal?: AbortSignal): Promise<void> {
    const path = Buffer.from(`\\\\${target.host}\\${target.share}`, 'utf16le');
    const body = Buffer.alloc(8);
    body.writeUInt16LE(9, 0);
    body.writeUInt16LE(64 + 8, 4);
    body.writeUInt16LE(path.length, 6);
    const { msg } = await this.conn.request(Command.TREE_CONNECT, Buffer.concat([body, path]), { signal });
    if (msg.readUInt32LE(64 + 4) & ShareFlag.ENCRYPT_DATA) throw new SmbEncryptionRequired(`the share ${target.share} requires encryption`);
    this.treeId = msg.readUInt32LE(36);
  }

  /** CREATE of `name` (backslash-separated, relative to the share; '' is its root). */
  async create(name: string, o: CreateOptions): Promise<SmbHandle> {
    const nameBytes = Buffer.from(name, 'utf16le');
    const body = Buffer.alloc(56 + Math.max(1, nameBytes.length));
    body.writeUInt16LE(57, 0);
    body.writeUInt32LE(2, 4); // impersonation level: Impersonation
    body.writeUInt32LE(o.access, 24);
    body.writeUInt32LE(o.attributes ?? 0, 28);
    body.writeUInt32LE(o.share ?? 0x7, 32);
    body.writeUInt32LE(o.disposition, 36);
    body.writeUInt32LE(o.options ?? 0, 40);
    body.writeUInt16LE(64 + 56, 44);
    body.writeUInt16LE(nameBytes.length, 46);
    nameBytes.copy(body, 56);
    const { msg } = await this.conn.request(Command.CREATE, body, { signal: o.signal, treeId: this.treeId });
    const b = 64;
    const attributes = msg.readUInt32LE(b + 56);
    return {
      fileId: Buffer.from(msg.subarray(b + 64, b + 80)),
      directory: (attributes & FileAttribute.DIRECTORY) !== 0,
      size: Number(msg.readBigUInt64LE(b + 48)),
      modifiedAt: fromFileTime(msg.readBigUInt64LE(b + 24)),
    };
  }

  /** CLOSE; with `query`, the file's size as the server has it after the close. */
  async close(fileId: Buffer, query = false, signal?: AbortSignal): Promise<number> {
    const body = Buffer.alloc(24);
    body.writeUInt16LE(24, 0);
    body.writeUInt16LE(query ? 1 : 0, 2);
    fileId.copy(body, 8);
    const { msg } = await this.conn.request(Command.CLOSE, body, { signal, treeId: this.treeId });
    return query ? Number(msg.readBigUInt64LE(64 + 48)) : 0;
  }

  /** Closes without waiting or failing: for cleanup paths where the handle is all that is left. */
  closeQuietly(fileId: Buffer): Promise<void> {
    if (this.closed) return Promise.resolve();
    return this.close(fileId).then(() => undefined, () => undefined);
  }

  /** READ of up to `length` bytes at `offset`; an empty buffer at the end of the file. */
  async read(fileId: Buffer, offset: number, length: number, signal?: AbortSignal): Promise<Buffer> {
    const body = Buffer.alloc(49);
    body.writeUInt16LE(49, 0);
    body.writeUInt8(0x50, 2);
    body.writeUInt32LE(length, 4);
    body.writeBigUInt64LE(BigInt(offset), 8);
    fileId.copy(body, 16);
    const { status, msg } = await this.conn.request(Command.READ, body, { signal, treeId: this.treeId, charge: credits(length), ok: [Status.END_OF_FILE] });
    if (status === Status.END_OF_FILE) return Buffer.alloc(0);
    const dataOffset = msg.readUInt8(64 + 2);
    const dataLength = msg.readUInt32LE(64 + 4);
    return msg.subarray(dataOffset, dataOffset + dataLength);
  }

  /** WRITE of `data` at `offset`; resolves with the count the server wrote. */
  async write(fileId: Buffer, offset: number, data: Buffer, signal?: AbortSignal): Promise<number> {
    const body = Buffer.alloc(48);
    body.writeUInt16LE(49, 0);
    body.writeUInt16LE(64 + 48, 2);
    body.writeUInt32LE(data.length, 4);
    body.writeBigUInt64LE(BigInt(offset), 8);
    fileId.copy(body, 16);
    const { msg } = await this.conn.request(Command.WRITE, Buffer.concat([body, data.length ? data : Buffer.alloc(1)]), { signal, treeId: this.treeId, charge: credits(data.length) });
    return msg.readUInt32LE(64 + 4);
  }

  async flush(fileId: Buffer, signal?: AbortSignal): Promise<void> {
    const body = Buffer.alloc(24);
    body.writeUInt16LE(24, 0);
    fileId.copy(body, 8);
    await this.conn.request(Command.FLUSH, body, { signal, treeId: this.treeId });
  }

  /**
   * One QUERY_DIRECTORY page (FileDirectoryInformation, pattern `*`) of an open directory, without
   * `.` and `..`; null once the server answers STATUS_NO_MORE_FILES.
   */
  async queryDirectory(fileId: Buffer, first: boolean, signal?: AbortSignal): Promise<DirectoryEntry[] | null> {
    const pattern = Buffer.from('*', 'utf16le');
    const body = Buffer.alloc(32);
    body.writeUInt16LE(33, 0);
    body.writeUInt8(InfoClass.FILE_DIRECTORY_INFORMATION, 2);
    body.writeUInt8(first ? 0x01 : 0, 3); // RESTART_SCANS on the first page
    fileId.copy(body, 8);
    body.writeUInt16LE(64 + 32, 24);
    body.writeUInt16LE(pattern.length, 26);
    body.writeUInt32LE(this.maxTransact, 28);
    const { status, msg } = await this.conn.request(Command.QUERY_DIRECTORY, Buffer.concat([body, pattern]), {
      signal, treeId: this.treeId, charge: credits(this.maxTransact), ok: [Status.NO_MORE_FILES, Status.NO_SUCH_FILE],
    });
    if (status !== Status.SUCCESS) return null;
    const offset = msg.readUInt16LE(64 + 2);
    const length = msg.readUInt32LE(64 + 4);
    const out: DirectoryEntry[] = [];
    for (let at = offset; at < offset + length; ) {
      const next = msg.readUInt32LE(at);
      const nameLength = msg.readUInt32LE(at + 60);
      const name = msg.toString('utf16le', at + 64, at + 64 + nameLength);
      const attributes = msg.readUInt32LE(at + 56);
      if (name !== '.' && name !== '..') {
        out.push({
          name,
          directory: (attributes & FileAttribute.DIRECTORY) !== 0,
          size: Number(msg.readBigUInt64LE(at + 40)),
          modifiedAt: fromFileTime(msg.readBigUInt64LE(at + 24)),
          reparse: (attributes & FileAttribute.REPARSE_POINT) !== 0,
        });
      }
      if (next === 0) break;
      at += next;
    }
    return out;
  }

  /** SET_INFO FileRenameInformation: renames the open file to `target` (relative to the share), replacing it. */
  async rename(fileId: Buffer, target: string, signal?: AbortSignal): Promise<void> {
    const name = Buffer.from(target, 'utf16le');
    const info = Buffer.alloc(20 + name.length);
    info.writeUInt8(1, 0); // ReplaceIfExists
    info.writeUInt32LE(name.length, 16);
    name.copy(info, 20);
    await this.setInfo(fileId, InfoClass.FILE_RENAME_INFORMATION, info, signal);
  }

  /**
   * SET_INFO FileBasicInformation with only LastWriteTime (zero leaves the other times and the
   * attributes as they are). Samba keeps a time set this way through the handle's close (a
   * "sticky" write time), whatever was written before.
   */
  async setModifiedAt(fileId: Buffer, time: Date, signal?: AbortSignal): Promise<void> {
    const info = Buffer.alloc(40);
    info.writeBigUInt64LE(toFileTime(time), 16);
    await this.setInfo(fileId, InfoClass.FILE_BASIC_INFORMATION, info, signal);
  }

  /** Marks the open file or (empty) directory for deletion when its last handle closes. */
  async deleteOnClose(fileId: Buffer, signal?: AbortSignal): Promise<void> {
    await this.setInfo(fileId, InfoClass.FILE_DISPOSITION_INFORMATION, Buffer.from([1]), signal);
  }

  private async setInfo(fileId: Buffer, infoClass: number, info: Buffer, signal?: AbortSignal): Promise<void> {
    const body = Buffer.alloc(32);
    body.writeUInt16LE(33, 0);
    body.writeUInt8(1, 2); // SMB2_0_INFO_FILE
    body.writeUInt8(infoClass, 3);
    body.writeUInt32LE(info.length, 4);
    body.writeUInt16LE(64 + 32, 8);
    fileId.copy(body, 16);
    await this.conn.request(Command.SET_INFO, Buffer.concat([body, info]), { signal, treeId: this.treeId });
  }

  destroy(): void {
    this.conn.destroy();
  }
}

function sessionSetupBody(token: Buffer): Buffer {
  const body = Buffer.alloc(24);
  body.writeUInt16LE(25, 0);
  body.writeUInt8(SecurityMode.SIGNING_ENABLED, 3);
  body.writeUInt16LE(64 + 24, 12);
  body.writeUInt16LE(token.length, 14);
  return Buffer.concat([body, token]);
}

function securityBuffer(msg: Buffer): Buffer {
  const offset = msg.readUInt16LE(64 + 4);
  const length = msg.readUInt16LE(64 + 6);
  return msg.subarray(offset, offset + length);
}

function negotiateContext(type: number, data: Buffer): Buffer {
  const head = Buffer.alloc(8);
  head.writeUInt16LE(type, 0);
  head.writeUInt16LE(data.length, 2);
  return Buffer.concat([head, data]);
}

function pad8(n: number): number {
  return (8 - (n % 8)) % 8;
}

/** The signing algorithm a 3.1.1 NEGOTIATE answer chose; AES-CMAC when it names none. */
function signingAlgorithmOf(msg: Buffer): number {
  let at = msg.readUInt32LE(64 + 60);
  for (let i = msg.readUInt16LE(64 + 6); i > 0 && at + 8 <= msg.length; i--) {
    const type = msg.readUInt16LE(at);
    const length = msg.readUInt16LE(at + 2);
    if (type === NegotiateContext.SIGNING && length >= 4) return msg.readUInt16LE(at + 10);
    at += 8 + length + pad8(length);
  }
  return SigningAlgorithmId.AES_CMAC;
}

function credits(bytes: number): number {
  return Math.max(1, Math.ceil(bytes / CREDIT_UNIT));
}
