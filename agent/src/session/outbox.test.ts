import { AgentToServer, frame, type AgentMessage } from '@xfer/shared';
import { isDurable, Outbox } from './outbox.js';

const credentials = (connection: string, token: string, previous: string) =>
  frame(AgentToServer, 'connection.credentials', { connection_id: connection, credentials: { refresh_token: token }, previous_sha256: { refresh_token: previous } }) as AgentMessage;

describe('Outbox: rotated credentials', () => {
  const A = 'a'.repeat(24);
  const B = 'b'.repeat(24);
  const h = (c: string) => c.repeat(64);

  it('keeps them across a disconnect, one per connection: the newest value over the oldest replaced one', () => {
    const outbox = new Outbox();
    expect(isDurable(credentials(A, 't2', h('1')))).toBe(true);
    outbox.put(credentials(A, 't2', h('1')));
    outbox.put(credentials(A, 't3', h('2')));
    outbox.put(credentials(B, 'u2', h('3')));
    expect(outbox.size).toBe(2);
    const sent = outbox.take().map((m) => m.payload);
    expect(sent).toEqual([
      { connection_id: A, credentials: { refresh_token: 't3' }, previous_sha256: { refresh_token: h('1') } },
      { connection_id: B, credentials: { refresh_token: 'u2' }, previous_sha256: { refresh_token: h('3') } },
    ]);
    expect(outbox.size).toBe(0);
  });
});
