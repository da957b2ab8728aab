import { AgentToServer, parseMessage, ProtocolError, ServerToAgent } from './agent-protocol.js';
import {
  decodeRelayChunk, encodeRelayChunk, MAX_RELAY_SENT_FILES, RELAY_CHUNK_BYTES, RELAY_FRAME_HEADER_BYTES, RELAY_WINDOW_BYTES,
} from './relay-protocol.js';

const JOB = '0123456789abcdef01234567';

describe('relay binary frames', () => {
  test('a chunk round-trips: job id, attempt and payload, the payload a view into the frame', () => {
    const payload = Buffer.from('tar bytes');
    const frame = encodeRelayChunk(JOB, 7, payload);
    expect(frame.length).toBe(RELAY_FRAME_HEADER_BYTES + payload.length);
    const chunk = decodeRelayChunk(frame);
    expect(chunk).toEqual({ jobId: JOB, attempt: 7, payload });
    expect(chunk.payload.buffer).toBe(frame.buffer);
  });

  test('an empty payload and the largest one are frames', () => {
    expect(decodeRelayChunk(encodeRelayChunk(JOB, 1, Buffer.alloc(0))).payload.length).toBe(0);
    expect(decodeRelayChunk(encodeRelayChunk(JOB, 1, Buffer.alloc(RELAY_CHUNK_BYTES))).payload.length).toBe(RELAY_CHUNK_BYTES);
  });

  test('frames that are not relay frames are protocol errors', () => {
    const good = encodeRelayChunk(JOB, 2, Buffer.from('x'));
    expect(() => decodeRelayChunk(good.subarray(0, RELAY_FRAME_HEADER_BYTES - 1))).toThrow(ProtocolError);
    const badMagic = Buffer.from(good);
    badMagic[0] = 0;
    expect(() => decodeRelayChunk(badMagic)).toThrow(ProtocolError);
    const badKind = Buffer.from(good);
    badKind[1] = 9;
    expect(() => decodeRelayChunk(badKind)).toThrow(ProtocolError);
    const zeroAttempt = Buffer.from(good);
    zeroAttempt.writeUInt32BE(0, 14);
    expect(() => decodeRelayChunk(zeroAttempt)).toThrow(ProtocolError);
    const tooLong = Buffer.concat([good.subarray(0, RELAY_FRAME_HEADER_BYTES), Buffer.alloc(RELAY_CHUNK_BYTES + 1)]);
    expect(() => decodeRelayChunk(tooLong)).toThrow(ProtocolError);
  });

  test('encoding refuses what no peer would accept', () => {
    expect(() => encodeRelayChunk('not-a-job', 1, Buffer.alloc(1))).toThrow(RangeError);
    expect(() => encodeRelayChunk(JOB, 1, Buffer.alloc(RELAY_CHUNK_BYTES + 1))).toThrow(RangeError);
  });
});

describe('relay messages', () => {
  const msg = (type: string, payload: unknown) => JSON.stringify({ v: 1, type, id: '1', payload });

  test('forwarded messages parse in both directions', () => {
    for (const schemas of [AgentToServer, ServerToAgent]) {
      expect(parseMessage(schemas, msg('relay.credit', { job_id: JOB, attempt: 1, entries: 10, bytes: RELAY_WINDOW_BYTES })).type).toBe('relay.credit');
      expect(parseMessage(schemas, msg('relay.end', { job_id: JOB, attempt: 1 })).type).toBe('relay.end');
      expect(parseMessage(schemas, msg('relay.end', { job_id: JOB, attempt: 1, error: 'source path /x does not exist', permanent: true })).type).toBe('relay.end');
      expect(parseMessage(schemas, msg('relay.want', { job_id: JOB, attempt: 1, files: [{ path: 'a/b', size: 3 }] })).type).toBe('relay.want');
      expect(parseMessage(schemas, msg('relay.entries', {
        job_id: JOB, attempt: 1, done: true, entries: [{ path: 'a', kind: 'directory', size: 0 }, { path: 'a/b', kind: 'file', size: 3, checksum: { algorithm: 'md5', value: 'ab' } }],
      })).type).toBe('relay.entries');
    }
  });

  test('credit beyond the window, an empty want and a job id that is no ObjectId are refused', () => {
    expect(() => parseMessage(AgentToServer, msg('relay.credit', { job_id: JOB, attempt: 1, entries: 0, bytes: RELAY_WINDOW_BYTES + 1 }))).toThrow(ProtocolError);
    expect(() => parseMessage(AgentToServer, msg('relay.want', { job_id: JOB, attempt: 1, files: [] }))).toThrow(ProtocolError);
    expect(() => parseMessage(AgentToServer, msg('relay.end', { job_id: 'x', attempt: 1 }))).toThrow(ProtocolError);
  });

  test('relay.sent goes only from an agent to the control plane, within its bounds: a hex SHA-256 per file, 1 to 100 files', () => {
    const file = (i: number) => ({ path: `f${i}`, size: i, sha256: 'a'.repeat(64) });
    const sent = (files: unknown[]) => msg('relay.sent', { job_id: JOB, attempt: 1, files });
    expect(parseMessage(AgentToServer, sent(Array.from({ length: MAX_RELAY_SENT_FILES }, (_, i) => file(i)))).type).toBe('relay.sent');
    expect(() => parseMessage(AgentToServer, sent(Array.from({ length: MAX_RELAY_SENT_FILES + 1 }, (_, i) => file(i))))).toThrow(ProtocolError);
    expect(() => parseMessage(AgentToServer, sent([]))).toThrow(ProtocolError);
    expect(() => parseMessage(AgentToServer, sent([{ ...file(1), sha256: 'A'.repeat(64) }]))).toThrow(ProtocolError);
    expect(() => parseMessage(AgentToServer, sent([{ ...file(1), size: -1 }]))).toThrow(ProtocolError);
    expect(() => parseMessage(ServerToAgent, sent([file(1)]))).toThrow(new ProtocolError('unknown message type "relay.sent"'));
  });

  test('relay.source goes only from the control plane to an agent', () => {
    expect(() => parseMessage(AgentToServer, msg('relay.source', {}))).toThrow(new ProtocolError('unknown message type "relay.source"'));
  });
});
