import { AgentToServer, parseMessage, ProtocolError, ServerToAgent } from './agent-protocol.js';

const PROTOTYPE_NAMES = ['constructor', '__proto__', 'toString', 'hasOwnProperty', 'valueOf', 'isPrototypeOf', 'propertyIsEnumerable', 'toLocaleString'];

describe('parseMessage', () => {
  test.each([['agent → server', AgentToServer], ['server → agent', ServerToAgent]] as const)(
    '%s: a type named after an Object.prototype member is an unknown type (ProtocolError), never a TypeBox throw',
    (_direction, schemas) => {
      for (const type of PROTOTYPE_NAMES) {
        const raw = JSON.stringify({ v: 1, type, id: 'x', payload: {} });
        expect(() => parseMessage(schemas, raw)).toThrow(new ProtocolError(`unknown message type "${type}"`));
        expect(() => parseMessage(schemas, Buffer.from(raw))).toThrow(ProtocolError);
      }
    },
  );

  test('every real message type is still found', () => {
    expect(parseMessage(AgentToServer, JSON.stringify({ v: 1, type: 'pong', id: '1', payload: { request_id: 'r' } })).type).toBe('pong');
    expect(parseMessage(ServerToAgent, JSON.stringify({ v: 1, type: 'job.cancel', id: '1', payload: { job_id: 'j' } })).type).toBe('job.cancel');
  });

  test('source.settle and its result decode; an unknown outcome or more than 100 files is refused', () => {
    const connection = { id: 'c'.repeat(24), name: 'n', type: 'sftp', host: 'h', port: 22, path: '/', options: {}, agent_id: null, credentials: {} };
    const settle = { request_id: 'r', connection, action: 'move', source_path: '/in', to: '/done', files: [{ path: 'a/b.csv', size: 3 }] };
    const raw = (type: string, payload: unknown) => JSON.stringify({ v: 1, type, id: '1', payload });
    expect(parseMessage(ServerToAgent, raw('source.settle', settle)).payload).toEqual(settle);
    const files = Array.from({ length: 101 }, (_, i) => ({ path: `f${i}`, size: 1 }));
    expect(() => parseMessage(ServerToAgent, raw('source.settle', { ...settle, files }))).toThrow(ProtocolError);
    expect(() => parseMessage(ServerToAgent, raw('source.settle', { ...settle, action: 'copy' }))).toThrow(ProtocolError);
    const result = { request_id: 'r', results: [{ path: 'a/b.csv', outcome: 'moved' }, { path: 'c', outcome: 'failed', error: 'refused' }] };
    expect(parseMessage(AgentToServer, raw('source.settle.result', result)).payload).toEqual(result);
    expect(parseMessage(AgentToServer, raw('source.settle.result', { request_id: 'r', results: [], error: 'agent busy' })).type).toBe('source.settle.result');
    expect(() => parseMessage(AgentToServer, raw('source.settle.result', { request_id: 'r', results: [{ path: 'a', outcome: 'kept' }] }))).toThrow(ProtocolError);
  });

  test('bytes that are not UTF-8 are refused, not replaced', () => {
    const raw = Buffer.concat([Buffer.from('{"v":1,"type":"pong","id":"1","payload":{"request_id":"'), Buffer.from([0xc3, 0x28]), Buffer.from('"}}')]);
    expect(() => parseMessage(AgentToServer, raw)).toThrow(new ProtocolError('frame is not valid UTF-8'));
  });
});
