import { once } from 'node:events';
import { createServer, type Server, type Socket } from 'node:net';
import { ConnectorError } from '../types.js';
import { RpcClient } from './rpc.client.js';
import { XdrError, XdrReader, XdrWriter } from './xdr.js';

describe('XDR (RFC 4506)', () => {
  it('encodes words, hypers, opaque data padded to four bytes, and strings, and reads them back', () => {
    const bytes = new XdrWriter(4).u32(0xdeadbeef).bool(true).u64(2 ** 40 + 5).opaque(Buffer.from('abcde')).string('日本').fixed(Buffer.from([1, 2, 3])).finish();
    // 4 + 4 + 8 + (4 + 8) + (4 + 8) + 4
    expect(bytes.length).toBe(44);
    expect(bytes.subarray(24, 28).toString('hex')).toBe('65000000');
    const r = new XdrReader(Buffer.from(bytes));
    expect([r.u32(), r.bool(), r.u64(), r.opaque().toString(), r.string(), [...r.fixed(3)]]).toEqual([0xdeadbeef, true, 2 ** 40 + 5, 'abcde', '日本', [1, 2, 3]]);
    expect(r.remaining).toBe(0);
  });

  it('refuses a reply that ends early or an opaque above its bound', () => {
    expect(() => new XdrReader(Buffer.alloc(3)).u32()).toThrow(XdrError);
    expect(() => new XdrReader(new XdrWriter().u32(100).finish()).opaque()).toThrow(/reply ends/);
    expect(() => new XdrReader(new XdrWriter().opaque(Buffer.alloc(65)).finish()).opaque(64)).toThrow(/exceeds its bound of 64/);
  });
});

/** A call as the test server decoded it. */
interface Call {
  xid: number;
  prog: number;
  vers: number;
  proc: number;
  uid: number;
  gid: number;
  args: XdrReader;
}

/**
 * A loopback ONC-RPC server of the test's own: decodes record-marked calls (AUTH_SYS), and
 * answers through `answer`, which writes reply records however it likes.
 */
async function rpcServer(answer: (call: Call, socket: Socket) => void): Promise<{ server: Server; port: number; connections: () => number }> {
  let connections = 0;
  const server = createServer((socket) => {
    connections++;
    let buffered = Buffer.alloc(0);
    socket.on('data', (data: Buffer) => {
      buffered = Buffer.concat([buffered, data]);
      while (buffered.length >= 4) {
        const length = buffered.readUInt32BE(0) & 0x7fff_ffff;
        if (buffered.length < 4 + length) return;
        const r = new XdrReader(buffered.subarray(4, 4 + length));
        buffered = buffered.subarray(4 + length);
        const xid = r.u32();
        r.u32(); // CALL
        r.u32(); // rpcvers
        const [prog, vers, proc] = [r.u32(), r.u32(), r.u32()];
        expect(r.u32()).toBe(1); // AUTH_SYS
        const cred = new XdrReader(Buffer.from(r.opaque(400)));
        cred.u32(); // stamp
        cred.string(); // machine name
        const [uid, gid] = [cred.u32(), cred.u32()];
        r.u32(); // verifier flavor
        r.opaque();
        answer({ xid, prog, vers, proc, uid, gid, args: r }, socket);
      }
    });
    socket.on('error', () => undefined);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { server, port: (server.address() as { port: number }).port, connections: () => connections };
}

/** Reply header of an accepted call; `state` 0 is SUCCESS. */
function accepted(xid: number, state = 0): XdrWriter {
  return new XdrWriter().u32(xid).u32(1).u32(0).u32(0).u32(0).u32(state);
}

/** One record in `fragments` fragments (only the last one marked last). */
function record(body: Buffer, fragments = 1): Buffer {
  const parts: Buffer[] = [];
  const size = Math.ceil(body.length / fragments);
  for (let at = 0; at < body.length; at += size) {
    const piece = body.subarray(at, at + size);
    const mark = Buffer.alloc(4);
    mark.writeUInt32BE(((at + size >= body.length ? 0x8000_0000 : 0) | piece.length) >>> 0);
    parts.push(mark, piece);
  }
  return Buffer.concat(parts);
}

function client(port: number, uid = 1234, gid = 5678): RpcClient {
  return new RpcClient({ host: '127.0.0.1', port, listener: 'a test server', auth: { uid, gid }, timeoutMs: 5_000, reservedPort: false });
}

describe('ONC-RPC client (RFC 5531) over TCP', () => {
  const servers: Server[] = [];
  afterAll(async () => {
    for (const s of servers) s.close();
  });

  it('multiplexes calls by xid: replies out of order, in several fragments, cut anywhere, reach their callers', async () => {
    const held: Call[] = [];
    const { server, port } = await rpcServer((call, socket) => {
      expect([call.uid, call.gid]).toEqual([1234, 5678]);
      held.push(call);
      if (held.length < 3) return;
      // All three answered in reverse order, the bytes written one at a time.
      const bytes = Buffer.concat(held.reverse().map((c) => record(accepted(c.xid).u32(c.args.u32() * 10).finish(), 3)));
      for (let i = 0; i < bytes.length; i++) socket.write(bytes.subarray(i, i + 1));
    });
    servers.push(server);
    const c = client(port);
    const results = await Promise.all([1, 2, 3].map(async (n) => (await c.call(7, 1, 1, [new XdrWriter().u32(n).finish()])).u32()));
    expect(results).toEqual([10, 20, 30]);
    await c.close();
  });

  it('maps RPC refusals: version mismatch is UNSUPPORTED naming the versions, a weak credential AUTH', async () => {
    const { server, port } = await rpcServer((call, socket) => {
      if (call.proc === 1) socket.write(record(accepted(call.xid, 2).u32(4).u32(4).finish()));
      else socket.write(record(new XdrWriter().u32(call.xid).u32(1).u32(1).u32(1).u32(5).finish()));
    });
    servers.push(server);
    const c = client(port);
    await expect(c.call(100003, 3, 1, [])).rejects.toMatchObject({ code: 'UNSUPPORTED', message: expect.stringMatching(/serves NFS versions 4 to 4, not version 3/) });
    await expect(c.call(100003, 3, 2, [])).rejects.toMatchObject({ code: 'AUTH', message: expect.stringMatching(/AUTH_TOOWEAK.*privileged source port/) });
    await c.close();
  });

  it('re-sends an idempotent call once on a new connection when the connection drops; others fail TRANSIENT', async () => {
    let calls = 0;
    const { server, port, connections } = await rpcServer((call, socket) => {
      // The first call of each connection is lost with it; later ones are answered.
      if (++calls % 2 === 1) socket.destroy();
      else socket.write(record(accepted(call.xid).u32(42).finish()));
    });
    servers.push(server);
    const c = client(port);
    expect((await c.call(7, 1, 1, [])).u32()).toBe(42);
    expect(connections()).toBe(2);
    const err = await c.call(7, 1, 1, [], { retry: false }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConnectorError);
    expect(err).toMatchObject({ code: 'TRANSIENT', message: expect.stringMatching(new RegExp(`connection to 127.0.0.1:${port}: connection closed by the server`)) });
    await c.close();
  });

  it('an aborted call rejects TRANSIENT "aborted" at once, and a late reply to it is ignored', async () => {
    const { server, port } = await rpcServer((call, socket) => {
      setTimeout(() => socket.write(record(accepted(call.xid).u32(1).finish())), 100);
    });
    servers.push(server);
    const c = client(port);
    const controller = new AbortController();
    const pending = c.call(7, 1, 1, [], { signal: controller.signal });
    controller.abort();
    await expect(pending).rejects.toMatchObject({ code: 'TRANSIENT', message: 'aborted' });
    expect((await c.call(7, 1, 1, [])).u32()).toBe(1);
    await c.close();
  });
});
