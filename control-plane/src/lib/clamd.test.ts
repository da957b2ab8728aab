// Framing edge cases of the INSTREAM client against a tiny local TCP server (what a real clamd
// cannot be made to do on purpose: split replies, early closes, odd answers). The scanner's
// behaviour against the real clamd is in control-plane/test/scanner.test.ts.
import { createServer, type Server, type Socket } from 'node:net';
import { Readable } from 'node:stream';
import { ClamdError, instream, parseInstreamReply, type ClamdAddress } from './clamd.js';

interface Received {
  command: string;
  frames: number[];
  payload: Buffer;
  terminated: boolean;
}

/** Splits what a client sent into its command, chunk lengths and payload, as clamd reads it. */
function parseInstream(bytes: Buffer): Received {
  const nul = bytes.indexOf(0);
  const command = bytes.subarray(0, nul).toString();
  const frames: number[] = [];
  const parts: Buffer[] = [];
  let offset = nul + 1;
  let terminated = false;
  while (offset + 4 <= bytes.length) {
    const length = bytes.readUInt32BE(offset);
    offset += 4;
    if (length === 0) {
      terminated = true;
      break;
    }
    frames.push(length);
    parts.push(bytes.subarray(offset, offset + length));
    offset += length;
  }
  return { command, frames, payload: Buffer.concat(parts), terminated };
}

/** A TCP server on 127.0.0.1 running `onConnection` for each client. */
async function fakeServer(onConnection: (socket: Socket) => void): Promise<{ address: ClamdAddress; server: Server }> {
  const server = createServer(onConnection);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return { address: { host: '127.0.0.1', port }, server };
}

/** Answers `reply` once the client's stream is complete (terminator seen); records what it got. */
function replyAtEnd(reply: (received: Received) => string[], seen: Received[] = []) {
  return (socket: Socket) => {
    const parts: Buffer[] = [];
    socket.on('data', async (data) => {
      parts.push(data);
      const received = parseInstream(Buffer.concat(parts));
      if (!received.terminated) return;
      seen.push(received);
      for (const piece of reply(received)) {
        socket.write(piece);
        await new Promise((r) => setTimeout(r, 20));
      }
      socket.end();
    });
  };
}

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
});
async function serve(onConnection: (socket: Socket) => void): Promise<ClamdAddress> {
  const { address, server } = await fakeServer(onConnection);
  servers.push(server);
  return address;
}

const reason = async (promise: Promise<unknown>): Promise<string> => {
  const err = await promise.then(() => null, (e: unknown) => e);
  if (!(err instanceof ClamdError)) throw new Error(`expected a ClamdError, got ${String(err)}`);
  return err.reason;
};

describe('instream framing', () => {
  test('sends zINSTREAM, 4-byte big-endian lengths, no empty frame before the zero-length terminator, bytes unchanged', async () => {
    const seen: Received[] = [];
    const address = await serve(replyAtEnd(() => ['stream: OK\0'], seen));
    const big = Buffer.alloc(600 * 1024, 7);
    const verdict = await instream(address, Readable.from([Buffer.from('abc'), Buffer.alloc(0), 'text', big]), { timeoutMs: 5000 });
    expect(verdict).toEqual({ clean: true });
    expect(seen).toHaveLength(1);
    const got = seen[0]!;
    expect(got.command).toBe('zINSTREAM');
    expect(got.frames[0]).toBe(3);
    expect(got.frames.every((n) => n > 0 && n <= 256 * 1024)).toBe(true);
    expect(got.payload.equals(Buffer.concat([Buffer.from('abctext'), big]))).toBe(true);
  });

  test('an empty stream is just the terminator', async () => {
    const seen: Received[] = [];
    const address = await serve(replyAtEnd(() => ['stream: OK\0'], seen));
    await expect(instream(address, Readable.from([]), { timeoutMs: 5000 })).resolves.toEqual({ clean: true });
    expect(seen[0]).toMatchObject({ frames: [], terminated: true });
  });

  test('a reply split over several packets is put back together', async () => {
    const address = await serve(replyAtEnd(() => ['stream: Some.Sig', 'nature-1 FO', 'UND\0']));
    await expect(instream(address, Readable.from([Buffer.from('x')]), { timeoutMs: 5000 })).resolves.toEqual({ clean: false, signature: 'Some.Signature-1' });
  });

  test('a reply ended by closing the connection instead of NUL still counts', async () => {
    const address = await serve(replyAtEnd(() => ['stream: OK']));
    await expect(instream(address, Readable.from([Buffer.from('x')]), { timeoutMs: 5000 })).resolves.toEqual({ clean: true });
  });

  test('a connection closed without a reply is "closed", never clean', async () => {
    const address = await serve(replyAtEnd(() => []));
    expect(await reason(instream(address, Readable.from([Buffer.from('x')]), { timeoutMs: 5000 }))).toBe('closed');
  });

  test('a connection closed right after the command is "closed"', async () => {
    const address = await serve((socket) => socket.once('data', () => socket.destroy()));
    const source = Readable.from((function* () {
      for (let i = 0; i < 64; i++) yield Buffer.alloc(1024 * 1024);
    })());
    expect(await reason(instream(address, source, { timeoutMs: 5000 }))).toBe('closed');
  });

  test('a size refusal sent mid-stream wins over the write errors that follow it (413, not 503)', async () => {
    const address = await serve((socket) => {
      let total = 0;
      socket.on('data', (data) => {
        total += data.length;
        if (total > 1024 * 1024 && !socket.destroyed) {
          socket.end('INSTREAM size limit exceeded. ERROR\0');
          socket.destroy();
        }
      });
    });
    for (let run = 0; run < 5; run++) {
      const source = Readable.from((function* () {
        for (let i = 0; i < 100; i++) yield Buffer.alloc(256 * 1024, i);
      })());
      expect(await reason(instream(address, source, { timeoutMs: 5000 }))).toBe('size-limit');
    }
  });

  test('a server that reads everything but never answers times out, also when the end came while the socket was full', async () => {
    let serverSawClose!: Promise<void>;
    const address = await serve((socket) => {
      serverSawClose = new Promise((r) => socket.once('close', () => r()));
      // Reads slowly at first, so the client's socket is full when its source ends.
      socket.pause();
      setTimeout(() => socket.resume(), 200);
    });
    const started = Date.now();
    const scanning = instream(address, Readable.from([Buffer.alloc(32 * 1024 * 1024)], { objectMode: false }), { timeoutMs: 600 });
    const err = await scanning.catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ClamdError);
    expect((err as ClamdError).reason).toBe('timeout');
    expect((err as Error).message).toMatch(/waiting for the verdict/);
    expect(Date.now() - started).toBeLessThan(5000);
    await serverSawClose;
  });

  test('an OK before the end of the stream is refused (clamd would have scanned only part of it)', async () => {
    const address = await serve((socket) => socket.once('data', () => socket.write('stream: OK\0')));
    const source = new Readable({ read() {} });
    source.push(Buffer.from('first part'));
    expect(await reason(instream(address, source, { timeoutMs: 5000 }))).toBe('protocol');
    expect(source.isPaused()).toBe(true);
  });

  test("the source's own error rejects with that error and closes the connection", async () => {
    let serverSawClose!: Promise<void>;
    const address = await serve((socket) => {
      serverSawClose = new Promise((r) => socket.once('close', () => r()));
      socket.resume();
    });
    const source = new Readable({ read() {} });
    const scanning = instream(address, source, { timeoutMs: 5000 });
    source.push(Buffer.from('part'));
    await new Promise((r) => setTimeout(r, 50));
    const failure = new Error('client went away');
    source.destroy(failure);
    await expect(scanning).rejects.toBe(failure);
    await serverSawClose;
  });
});

describe('parseInstreamReply (fails closed)', () => {
  test.each([
    ['stream: OK', { clean: true }],
    ['stream: Win.Test.EICAR_HDB-1 FOUND', { clean: false, signature: 'Win.Test.EICAR_HDB-1' }],
    ['stream: Heuristics.Limits.Exceeded.MaxRecursion FOUND', { clean: false, signature: 'Heuristics.Limits.Exceeded.MaxRecursion' }],
  ])('%j is a verdict', (line, verdict) => {
    expect(parseInstreamReply(`${line}\0`)).toEqual(verdict);
  });

  test.each([
    ['INSTREAM size limit exceeded. ERROR', 'size-limit'],
    ['stream: Heuristics.Limits.Exceeded.MaxFileSize FOUND', 'size-limit'],
    ['stream: Heuristics.Limits.Exceeded.MaxScanSize FOUND', 'size-limit'],
    ["stream: Can't allocate memory ERROR", 'error'],
    ['UNKNOWN COMMAND', 'protocol'],
    ['stream: OKAY', 'protocol'],
    ['', 'closed'],
  ])('%j is no verdict (%s)', (line, why) => {
    let caught: unknown;
    try {
      parseInstreamReply(line);
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(ClamdError);
    expect((caught as ClamdError).reason).toBe(why);
  });
});
