import WebSocket from 'ws';
import {
  AgentToServer, frame, parseMessage, ServerToAgent,
  type AgentToServerType, type PayloadOf, type ServerMessage, type ServerToAgentType,
} from '@xfer/shared';
import type { App } from '../src/app.js';

type Of<T extends ServerToAgentType> = Extract<ServerMessage, { type: T }>;

/** Fails a wait that never ends (a bug), not a slow run: generous on purpose. */
const WAIT_MS = 20_000;

/**
 * A real WebSocket client speaking the agent protocol, for tests of the control plane's side.
 * Every frame the server sends is validated with the shared schemas, exactly as an agent does.
 */
export class ProtocolClient {
  readonly received: ServerMessage[] = [];
  /** Binary frames the server sent (relay frames, relay-protocol.ts), as they arrived. */
  readonly binaries: Buffer[] = [];
  /** Resolves with the close code and reason once the socket closed. */
  readonly closed: Promise<{ code: number; reason: string }>;
  private readonly waiters: Array<() => void> = [];
  private cursor = 0;

  private constructor(readonly ws: WebSocket) {
    ws.on('message', (data, isBinary) => {
      if (isBinary) this.binaries.push(data as Buffer);
      else this.received.push(parseMessage(ServerToAgent, data as Buffer));
      for (const wake of this.waiters.splice(0)) wake();
    });
    this.closed = new Promise((resolve) => ws.on('close', (code, reason) => {
      resolve({ code, reason: reason.toString() });
      for (const wake of this.waiters.splice(0)) wake();
    }));
  }

  /** Opens a socket to the app (which must be listening) with `token` as bearer. */
  static async open(app: App, token: string | null, options: { autoPong?: boolean } = {}): Promise<ProtocolClient> {
    const address = app.server.address();
    if (!address || typeof address === 'string') throw new Error('the app is not listening');
    const ws = new WebSocket(`ws://127.0.0.1:${address.port}/api/v1/agents/connect`, {
      headers: token ? { authorization: `Bearer ${token}` } : {},
      autoPong: options.autoPong ?? true,
    });
    const client = new ProtocolClient(ws);
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', reject);
      ws.once('unexpected-response', (_req, res) => reject(new Error(`HTTP ${res.statusCode}`)));
    });
    return client;
  }

  /** Opens a socket and says hello; resolves with the welcome. */
  static async connect(app: App, token: string, hello: Partial<PayloadOf<typeof AgentToServer, 'hello'>> = {}) {
    const client = await ProtocolClient.open(app, token);
    const welcome = await client.hello(hello);
    return { client, welcome };
  }

  async hello(overrides: Partial<PayloadOf<typeof AgentToServer, 'hello'>> = {}): Promise<Of<'welcome'>['payload']> {
    this.send('hello', {
      version: '0.1.0-test', hostname: 'test-host', connector_types: ['sftp', 's3'], running_jobs: [], max_jobs: 4, ...overrides,
    });
    return (await this.next('welcome')).payload;
  }

  send<T extends AgentToServerType>(type: T, payload: PayloadOf<typeof AgentToServer, T>): void {
    this.ws.send(JSON.stringify(frame(AgentToServer, type, payload)));
  }

  sendRaw(data: string | Buffer, binary = false): void {
    this.ws.send(data, { binary });
  }

  /** Sends a binary frame; resolves once it was handed to the operating system. */
  sendBinary(data: Buffer): Promise<void> {
    return new Promise((resolve, reject) => this.ws.send(data, { binary: true }, (err) => (err ? reject(err) : resolve())));
  }

  /** Waits until at least `count` binary frames arrived in all; returns them all. */
  async binaryFrames(count: number): Promise<Buffer[]> {
    await this.until(() => this.binaries.length >= count, `${count} binary frames`);
    return this.binaries;
  }

  /** Stops reading the socket (an agent that does not read), and reads again. */
  pause(): void {
    this.ws.pause();
  }

  resume(): void {
    this.ws.resume();
  }

  private async until(done: () => boolean, what: string): Promise<void> {
    const deadline = Date.now() + WAIT_MS;
    while (!done()) {
      if (this.ws.readyState === WebSocket.CLOSED) throw new Error(`socket closed while waiting for ${what}`);
      if (Date.now() > deadline) throw new Error(`never arrived: ${what}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, 1000);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  /** The next message of `type` not yet taken (earlier messages of other types are skipped). */
  async next<T extends ServerToAgentType>(type: T): Promise<Of<T>> {
    const deadline = Date.now() + WAIT_MS;
    for (;;) {
      while (this.cursor < this.received.length) {
        const message = this.received[this.cursor++]!;
        if (message.type === type) return message as Of<T>;
      }
      if (this.ws.readyState === WebSocket.CLOSED) throw new Error(`socket closed while waiting for ${type}`);
      if (Date.now() > deadline) throw new Error(`no ${type} message arrived`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, 1000);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  /** Every message of `type` received so far. */
  all<T extends ServerToAgentType>(type: T): Array<Of<T>> {
    return this.received.filter((m): m is Of<T> => m.type === type);
  }

  close(): void {
    this.ws.close(1000);
  }
}

/** Polls `check` until it returns a value other than undefined/false/null; fails after a long while (`timeoutMs`). */
export async function eventually<T>(check: () => Promise<T | undefined | null | false>, what: string, timeoutMs = WAIT_MS): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== null && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`never happened: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}
