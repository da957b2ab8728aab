import type { IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocketServer, type WebSocket } from 'ws';
import { AgentToServer, frame, parseMessage, ServerToAgent, type AgentMessage, type PayloadOf } from '@xfer/shared';

type AgentMessageOf<T extends AgentMessage['type']> = Extract<AgentMessage, { type: T }>;

/**
 * A small real WebSocket server on loopback that speaks the control plane's side of the agent
 * protocol, driven step by step by a test (the real control plane is tested with the agent in
 * e2e). Every frame the agent sends is validated with the shared schemas.
 */
export class TestControlPlane {
  readonly connections: AgentConnection[] = [];
  private waiting: { n: number; resolve: (c: AgentConnection) => void }[] = [];
  /** Answer the upgrade with this HTTP status instead of accepting it. */
  refuseWith: number | null = null;
  private constructor(private readonly wss: WebSocketServer) {}

  static async start(): Promise<TestControlPlane> {
    const wss = new WebSocketServer({ host: '127.0.0.1', port: 0, path: '/api/v1/agents/connect' });
    await new Promise<void>((resolve) => wss.once('listening', resolve));
    const server = new TestControlPlane(wss);
    wss.options.verifyClient = (_info, callback) => (server.refuseWith ? callback(false, server.refuseWith) : callback(true));
    wss.on('connection', (ws, request) => {
      const connection = new AgentConnection(ws, request.headers);
      server.connections.push(connection);
      const index = server.connections.length - 1;
      for (const w of server.waiting.filter((w) => w.n === index)) w.resolve(connection);
      server.waiting = server.waiting.filter((w) => w.n !== index);
    });
    return server;
  }

  /** Base URL as an operator would give it to the agent. */
  get baseUrl(): string {
    return `http://127.0.0.1:${(this.wss.address() as AddressInfo).port}/api/v1`;
  }

  get connectUrl(): string {
    return `ws://127.0.0.1:${(this.wss.address() as AddressInfo).port}/api/v1/agents/connect`;
  }

  /** The `n`th connection (0-based), waiting for it if it has not arrived yet. */
  connection(n: number): Promise<AgentConnection> {
    if (this.connections[n]) return Promise.resolve(this.connections[n]!);
    return new Promise((resolve) => this.waiting.push({ n, resolve }));
  }

  async close(): Promise<void> {
    for (const c of this.connections) c.ws.terminate();
    await new Promise<void>((resolve) => this.wss.close(() => resolve()));
  }
}

export class AgentConnection {
  readonly received: AgentMessage[] = [];
  /** Frames that failed validation (must stay empty). */
  readonly invalid: string[] = [];
  /** Called with each valid message as it arrives (a relay forwarder's hook). */
  onMessage: ((message: AgentMessage) => void) | null = null;
  /** Called with each binary frame (relay tar bytes); without it a binary frame counts as invalid. */
  onBinary: ((data: Buffer) => void) | null = null;
  readonly closed: Promise<{ code: number; reason: string }>;
  private readonly waiters: { match: (m: AgentMessage) => boolean; resolve: (m: AgentMessage) => void }[] = [];

  constructor(
    readonly ws: WebSocket,
    readonly headers: IncomingHttpHeaders,
  ) {
    this.closed = new Promise((resolve) => ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() })));
    ws.on('message', (data, isBinary) => {
      if (isBinary && this.onBinary) {
        this.onBinary(data as Buffer);
        return;
      }
      let message: AgentMessage;
      try {
        message = parseMessage(AgentToServer, data as Buffer);
      } catch (err) {
        this.invalid.push((err as Error).message);
        return;
      }
      this.received.push(message);
      this.onMessage?.(message);
      const i = this.waiters.findIndex((w) => w.match(message));
      if (i >= 0) this.waiters.splice(i, 1)[0]!.resolve(message);
    });
  }

  /** The next message of `type` not yet returned by `next` (messages are consumed in order per type). */
  next<T extends AgentMessage['type']>(type: T, where: (m: AgentMessageOf<T>) => boolean = () => true): Promise<AgentMessageOf<T>> {
    const match = (m: AgentMessage) => m.type === type && where(m as AgentMessageOf<T>);
    const seen = this.received.find((m) => match(m) && !this.taken.has(m));
    if (seen) {
      this.taken.add(seen);
      return Promise.resolve(seen as AgentMessageOf<T>);
    }
    return new Promise((resolve) => this.waiters.push({
      match: (m) => match(m) && !this.taken.has(m),
      resolve: (m) => { this.taken.add(m); resolve(m as AgentMessageOf<T>); },
    }));
  }

  private readonly taken = new Set<AgentMessage>();

  send<T extends keyof typeof ServerToAgent & string>(type: T, payload: PayloadOf<typeof ServerToAgent, T>): void {
    this.ws.send(JSON.stringify(frame(ServerToAgent, type, payload)));
  }

  /** Waits for hello and answers welcome. */
  async welcome(payload: Partial<PayloadOf<typeof ServerToAgent, 'welcome'>> = {}): Promise<AgentMessageOf<'hello'>> {
    const hello = await this.next('hello');
    this.send('welcome', { agent_id: 'a'.repeat(24), heartbeat_ms: 30_000, lease_ms: 90_000, abort_jobs: [], ...payload });
    return hello;
  }

  /** Messages of one type received so far. */
  all<T extends AgentMessage['type']>(type: T): AgentMessageOf<T>[] {
    return this.received.filter((m) => m.type === type) as AgentMessageOf<T>[];
  }
}
