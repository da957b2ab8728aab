import { randomBytes } from 'node:crypto';
import { hmacMd5, md4 } from './smb.crypto.js';

/**
 * NTLMSSP (MS-NLMP) with NTLMv2 responses only, and the SPNEGO (RFC 4178) DER wrapping SMB2
 * SESSION_SETUP carries it in. No key exchange (the session key is the NTLMv2 session base key,
 * which is what MS-NLMP specifies without NEGOTIATE_KEY_EXCH) and no NTLM-level signing: SMB2
 * signs with its own keys derived from the session key.
 */

const SIGNATURE = Buffer.from('NTLMSSP\0', 'latin1');
const NEGOTIATE_UNICODE = 0x1;
const REQUEST_TARGET = 0x4;
const NEGOTIATE_SIGN = 0x10;
const NEGOTIATE_NTLM = 0x200;
const ALWAYS_SIGN = 0x8000;
const EXTENDED_SESSIONSECURITY = 0x80000;
const NEGOTIATE_TARGET_INFO = 0x800000;
const NEGOTIATE_128 = 0x20000000;
const NEGOTIATE_56 = 0x80000000;
const FLAGS = (NEGOTIATE_UNICODE | REQUEST_TARGET | NEGOTIATE_SIGN | NEGOTIATE_NTLM | ALWAYS_SIGN | EXTENDED_SESSIONSECURITY | NEGOTIATE_TARGET_INFO | NEGOTIATE_128 | NEGOTIATE_56) >>> 0;
const AV_EOL = 0;
const AV_TIMESTAMP = 7;

/** OIDs, DER-encoded with tag and length. */
const SPNEGO_OID = Buffer.from('06062b0601050502', 'hex');
const NTLMSSP_OID = Buffer.from('060a2b06010401823702020a', 'hex');

export interface NtlmCredentials {
  username: string;
  password: string;
  domain: string;
}

/** The NTLM NEGOTIATE message (type 1). */
export function ntlmNegotiate(): Buffer {
  const msg = Buffer.alloc(32);
  SIGNATURE.copy(msg);
  msg.writeUInt32LE(1, 8);
  msg.writeUInt32LE(FLAGS, 12);
  return msg;
}

export interface NtlmChallenge {
  flags: number;
  serverChallenge: Buffer;
  targetInfo: Buffer;
}

export function parseChallenge(msg: Buffer): NtlmChallenge {
  if (msg.length < 48 || !msg.subarray(0, 8).equals(SIGNATURE) || msg.readUInt32LE(8) !== 2) throw new Error('the server sent no NTLM challenge');
  const infoLength = msg.readUInt16LE(40);
  const infoOffset = msg.readUInt32LE(44);
  if (infoOffset + infoLength > msg.length) throw new Error('malformed NTLM challenge');
  return { flags: msg.readUInt32LE(20), serverChallenge: msg.subarray(24, 32), targetInfo: msg.subarray(infoOffset, infoOffset + infoLength) };
}

/** NTOWFv2 (MS-NLMP 3.3.2): HMAC-MD5 of the user and domain under the NT hash. */
export function ntowfv2(creds: NtlmCredentials): Buffer {
  const ntHash = md4(Buffer.from(creds.password, 'utf16le'));
  return hmacMd5(ntHash, Buffer.from(creds.username.toUpperCase() + creds.domain, 'utf16le'));
}

export interface Ntlmv2Result {
  ntResponse: Buffer;
  lmResponse: Buffer;
  sessionBaseKey: Buffer;
}

/** NTLMv2 responses and session base key (MS-NLMP 3.3.2) for given challenge, time and client nonce. */
export function ntlmv2Response(responseKey: Buffer, serverChallenge: Buffer, clientChallenge: Buffer, timestamp: Buffer, targetInfo: Buffer): Ntlmv2Result {
  const temp = Buffer.concat([Buffer.from([1, 1, 0, 0, 0, 0, 0, 0]), timestamp, clientChallenge, Buffer.alloc(4), targetInfo, Buffer.alloc(4)]);
  const ntProof = hmacMd5(responseKey, serverChallenge, temp);
  return {
    ntResponse: Buffer.concat([ntProof, temp]),
    lmResponse: Buffer.concat([hmacMd5(responseKey, serverChallenge, clientChallenge), clientChallenge]),
    sessionBaseKey: hmacMd5(responseKey, ntProof),
  };
}

/** The AUTHENTICATE message (type 3) answering `challenge`, and the session key it establishes. */
export function ntlmAuthenticate(creds: NtlmCredentials, challenge: NtlmChallenge, workstation = ''): { message: Buffer; sessionKey: Buffer } {
  const serverTime = avPair(challenge.targetInfo, AV_TIMESTAMP);
  const timestamp = serverTime ?? fileTime(Date.now());
  const result = ntlmv2Response(ntowfv2(creds), challenge.serverChallenge, randomBytes(8), timestamp, challenge.targetInfo);
  // With the server's timestamp present, MS-NLMP 3.1.5.1.2 sends an all-zero LMv2 response.
  const lm = serverTime ? Buffer.alloc(24) : result.lmResponse;
  const fields = [lm, result.ntResponse, Buffer.from(creds.domain, 'utf16le'), Buffer.from(creds.username, 'utf16le'), Buffer.from(workstation, 'utf16le'), Buffer.alloc(0)];
  const header = Buffer.alloc(64);
  SIGNATURE.copy(header);
  header.writeUInt32LE(3, 8);
  let offset = header.length;
  fields.forEach((field, i) => {
    header.writeUInt16LE(field.length, 12 + i * 8);
    header.writeUInt16LE(field.length, 14 + i * 8);
    header.writeUInt32LE(offset, 16 + i * 8);
    offset += field.length;
  });
  header.writeUInt32LE(((FLAGS & challenge.flags) | NEGOTIATE_UNICODE) >>> 0, 60);
  return { message: Buffer.concat([header, ...fields]), sessionKey: result.sessionBaseKey };
}

/** The value of AV pair `id` in a target info block, or undefined. */
function avPair(info: Buffer, id: number): Buffer | undefined {
  for (let at = 0; at + 4 <= info.length; ) {
    const type = info.readUInt16LE(at);
    const length = info.readUInt16LE(at + 2);
    if (type === AV_EOL) return undefined;
    if (type === id) return info.subarray(at + 4, at + 4 + length);
    at += 4 + length;
  }
  return undefined;
}

/** Windows FILETIME (100 ns ticks since 1601), little-endian. */
export function fileTime(ms: number): Buffer {
  const out = Buffer.alloc(8);
  out.writeBigUInt64LE((BigInt(ms) + 11_644_473_600_000n) * 10_000n);
  return out;
}

/** A DER length. */
function derLength(n: number): Buffer {
  if (n < 0x80) return Buffer.from([n]);
  const bytes: number[] = [];
  for (let v = n; v > 0; v >>= 8) bytes.unshift(v & 0xff);
  return Buffer.from([0x80 | bytes.length, ...bytes]);
}

function der(tag: number, ...content: Buffer[]): Buffer {
  const body = Buffer.concat(content);
  return Buffer.concat([Buffer.from([tag]), derLength(body.length), body]);
}

/** SPNEGO NegTokenInit in a GSS-API InitialContextToken, offering NTLMSSP with its first message. */
export function spnegoInit(mechToken: Buffer): Buffer {
  const negTokenInit = der(0x30, der(0xa0, der(0x30, NTLMSSP_OID)), der(0xa2, der(0x04, mechToken)));
  return der(0x60, SPNEGO_OID, der(0xa0, negTokenInit));
}

/** SPNEGO NegTokenResp carrying the next NTLMSSP message. */
export function spnegoResponse(responseToken: Buffer): Buffer {
  return der(0xa1, der(0x30, der(0xa2, der(0x04, responseToken))));
}

/** One DER TLV at `at`: its tag, content and where the next one starts. */
function readTlv(buf: Buffer, at: number): { tag: number; content: Buffer; next: number } {
  if (at + 2 > buf.length) throw new Error('truncated SPNEGO token');
  const tag = buf[at]!;
  let length = buf[at + 1]!;
  let start = at + 2;
  if (length & 0x80) {
    const count = length & 0x7f;
    if (count > 4 || start + count > buf.length) throw new Error('malformed SPNEGO length');
    length = 0;
    for (let i = 0; i < count; i++) length = length * 256 + buf[start + i]!;
    start += count;
  }
  if (start + length > buf.length) throw new Error('truncated SPNEGO token');
  return { tag, content: buf.subarray(start, start + length), next: start + length };
}

/** negState (0 accept-completed, 1 accept-incomplete, 2 reject) and responseToken of a server's NegTokenResp. */
export function parseSpnegoResponse(token: Buffer): { state?: number; responseToken?: Buffer } {
  const outer = readTlv(token, 0);
  if (outer.tag !== 0xa1) throw new Error('the server answered without a SPNEGO NegTokenResp');
  const seq = readTlv(outer.content, 0);
  const out: { state?: number; responseToken?: Buffer } = {};
  for (let at = 0; at < seq.content.length; ) {
    const field = readTlv(seq.content, at);
    at = field.next;
    const inner = readTlv(field.content, 0);
    if (field.tag === 0xa0) out.state = inner.content[0];
    if (field.tag === 0xa2) out.responseToken = inner.content;
  }
  return out;
}
