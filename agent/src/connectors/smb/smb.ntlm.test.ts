import { hmacMd5 } from './smb.crypto.js';
import { ntlmAuthenticate, ntlmNegotiate, ntlmv2Response, ntowfv2, parseChallenge, parseSpnegoResponse, spnegoInit, spnegoResponse } from './smb.ntlm.js';

const hex = (s: string) => Buffer.from(s.replace(/\s+/g, ''), 'hex');

// MS-NLMP 4.2.4 "NTLMv2 Authentication": user "User", domain "Domain", password "Password",
// server challenge 0123456789abcdef, client challenge aa×8, time 0, and the AV pairs
// MsvAvNbDomainName "Domain", MsvAvNbComputerName "Server".
const creds = { username: 'User', domain: 'Domain', password: 'Password' };
const serverChallenge = hex('0123456789abcdef');
const clientChallenge = hex('aaaaaaaaaaaaaaaa');
const targetInfo = hex('02000c0044006f006d00610069006e0001000c005300650072007600650072000000 0000');

describe('NTLMv2 (MS-NLMP 4.2.4 test vectors)', () => {
  it('derives NTOWFv2 from user, domain and password', () => {
    expect(ntowfv2(creds).toString('hex')).toBe('0c868a403bfd7a93a3001ef22ef02e3f');
  });

  it('computes NTProofStr, the LMv2 response and the session base key', () => {
    const result = ntlmv2Response(ntowfv2(creds), serverChallenge, clientChallenge, Buffer.alloc(8), targetInfo);
    expect(result.ntResponse.subarray(0, 16).toString('hex')).toBe('68cd0ab851e51c96aabc927bebef6a1c');
    expect(result.lmResponse.toString('hex')).toBe('86c35097ac9cec102554764a57cccc19aaaaaaaaaaaaaaaa');
    expect(result.sessionBaseKey.toString('hex')).toBe('8de40ccadbc14a82f15cb0ad0de95ca3');
  });

  it('builds an AUTHENTICATE message whose NT response proves the password to a verifier', () => {
    const challenge = Buffer.alloc(48 + targetInfo.length);
    challenge.write('NTLMSSP\0', 'latin1');
    challenge.writeUInt32LE(2, 8);
    challenge.writeUInt32LE(0xe2898215, 20);
    serverChallenge.copy(challenge, 24);
    challenge.writeUInt16LE(targetInfo.length, 40);
    challenge.writeUInt16LE(targetInfo.length, 42);
    challenge.writeUInt32LE(48, 44);
    targetInfo.copy(challenge, 48);
    const { message, sessionKey } = ntlmAuthenticate(creds, parseChallenge(challenge));
    const field = (i: number) => message.subarray(message.readUInt32LE(16 + i * 8), message.readUInt32LE(16 + i * 8) + message.readUInt16LE(12 + i * 8));
    const nt = field(1);
    // What a server does: recompute NTProofStr from its copy of the key over the blob sent.
    const proof = hmacMd5(ntowfv2(creds), serverChallenge, nt.subarray(16));
    expect(nt.subarray(0, 16).equals(proof)).toBe(true);
    expect(sessionKey.equals(hmacMd5(ntowfv2(creds), proof))).toBe(true);
    expect(field(2).toString('utf16le')).toBe('Domain');
    expect(field(3).toString('utf16le')).toBe('User');
    expect(message.includes(Buffer.from('Password', 'utf16le'))).toBe(false);
  });
});

describe('SPNEGO wrapping', () => {
  it('wraps NTLMSSP in a GSS-API NegTokenInit as Windows clients send it', () => {
    const token = spnegoInit(ntlmNegotiate());
    // Application tag, SPNEGO OID, then mechTypes holding the NTLMSSP OID.
    expect(token.subarray(0, 2).toString('hex')).toBe(`60${(token.length - 2).toString(16)}`);
    expect(token.subarray(2, 10).toString('hex')).toBe('06062b0601050502');
    expect(token.includes(hex('060a2b06010401823702020a'))).toBe(true);
    expect(token.includes(Buffer.from('NTLMSSP\0', 'latin1'))).toBe(true);
  });

  it('reads negState and responseToken of a NegTokenResp, long lengths included', () => {
    const inner = Buffer.alloc(300, 7);
    const resp = spnegoResponse(inner);
    expect(parseSpnegoResponse(resp).responseToken?.equals(inner)).toBe(true);
    const completed = hex('a1073005a0030a0100');
    expect(parseSpnegoResponse(completed)).toEqual({ state: 0 });
    expect(() => parseSpnegoResponse(hex('a10730'))).toThrow(/truncated/);
  });
});
