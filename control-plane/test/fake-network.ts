import { createServer, connect, type Server, type Socket } from 'node:net';

/**
 * A fake network between two control-plane instances (there is no real one to cut in a test):
 * a TCP proxy on loopback that forwards to `target`, records every byte that crossed it, and can
 * cut every connection at once, without a close handshake, as a failed network does.
 */
export class FakeNetwork {
  /** Every byte that went through, both ways, in order. */
  readonly seen: Buffer[] = [];
  private readonly sockets = new Set<Socket>();
  private server!: Server;
  port = 0;
  target = 0;

  static async start(): Promise<FakeNetwork> {
    const network = new FakeNetwork();
    network.server = createServer((client) => network.accept(client));
    await new Promise<void>((resolve) => network.server.listen(0, '127.0.0.1', resolve));
    network.port = (network.server.address() as { port: number }).port;
    return network;
  }

  /** Everything that crossed, as one string (to look for what must not have). */
  get text(): string {
    return Buffer.concat(this.seen).toString('latin1');
  }

  /** Destroys every connection through it (new ones are still accepted). */
  cut(): void {
    for (const s of this.sockets) s.destroy();
    this.sockets.clear();
  }

  async close(): Promise<void> {
    this.cut();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: Socket): void {
    const upstream = connect(this.target, '127.0.0.1');
    for (const [from, to] of [[client, upstream], [upstream, client]] as const) {
      this.sockets.add(from);
      from.on('data', (data: Buffer) => {
        this.seen.push(Buffer.from(data));
        if (!to.write(data)) from.pause();
      });
      to.on('drain', () => from.resume());
      from.on('error', () => to.destroy());
      from.on('close', () => {
        this.sockets.delete(from);
        to.destroy();
      });
    }
  }
}
