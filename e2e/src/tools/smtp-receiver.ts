import type { AddressInfo } from 'node:net';
import { simpleParser } from 'mailparser';
import { SMTPServer, type SMTPServerSession } from 'smtp-server';
import type { TestCertificate } from './webhook-receiver.js';

/**
 * An SMTP receiver for tests: a real SMTP server (the `smtp-server` package) on loopback with a
 * self-signed certificate (makeTestCertificate), implicit TLS or STARTTLS, optional AUTH. It
 * records every message with its envelope, how the session was secured and who logged in, and
 * the message parsed by `mailparser` (headers decoded, body decoded). It can be stopped and
 * started again on the same port (an SMTP server that is down for a while).
 */

/** One message as received. */
export interface ReceivedMail {
  envelope: { from: string; to: string[] };
  /** True when the session ran over TLS (implicit or after STARTTLS). */
  secure: boolean;
  /** The user that authenticated, or null. */
  user: string | null;
  subject: string;
  text: string;
  headers: Map<string, unknown>;
  raw: string;
}

export interface SmtpReceiverOptions {
  cert: TestCertificate;
  /** true: implicit TLS; false: plain until STARTTLS (which the server offers). */
  secure: boolean;
  /** Accepted logins; when given, AUTH is required before MAIL. */
  users?: Record<string, string>;
  /** 0 (default) picks a free port. */
  port?: number;
  /** A server that does not offer STARTTLS (a client that requires TLS must give up). */
  noStartTls?: boolean;
}

export class SmtpReceiver {
  readonly mails: ReceivedMail[] = [];
  private server: SMTPServer | null = null;
  private boundPort = 0;

  private constructor(private readonly options: SmtpReceiverOptions) {}

  static async start(options: SmtpReceiverOptions): Promise<SmtpReceiver> {
    const receiver = new SmtpReceiver(options);
    await receiver.listen(options.port ?? 0);
    return receiver;
  }

  get port(): number {
    return this.boundPort;
  }

  /** Listening again on the same port after `stop()`. */
  async restart(): Promise<void> {
    await this.listen(this.boundPort);
  }

  async stop(): Promise<void> {
    const server = this.server;
    this.server = null;
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  private async listen(port: number): Promise<void> {
    const { cert, secure, users } = this.options;
    const server = new SMTPServer({
      secure,
      key: cert.key,
      cert: cert.cert,
      authOptional: !users,
      authMethods: ['PLAIN', 'LOGIN'],
      // AUTH only over TLS (the default): a client that authenticates in plaintext fails.
      allowInsecureAuth: false,
      logger: false,
      disabledCommands: [...(users ? [] : ['AUTH']), ...(this.options.noStartTls ? ['STARTTLS'] : [])],
      onAuth: (auth, _session, callback) => {
        if (users && auth.username && users[auth.username] !== undefined && users[auth.username] === auth.password) callback(null, { user: auth.username });
        else callback(new Error('Invalid username or password'));
      },
      onData: (stream, session: SMTPServerSession, callback) => {
        const chunks: Buffer[] = [];
        stream.on('data', (chunk: Buffer) => chunks.push(chunk));
        stream.on('end', () => {
          const raw = Buffer.concat(chunks).toString('utf8');
          simpleParser(raw).then((parsed) => {
            this.mails.push({
              envelope: {
                from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
                to: session.envelope.rcptTo.map((r) => r.address),
              },
              secure: session.secure,
              user: typeof session.user === 'string' ? session.user : null,
              subject: parsed.subject ?? '',
              text: parsed.text ?? '',
              headers: parsed.headers,
              raw,
            });
            callback();
          }, (err: Error) => callback(err));
        });
      },
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => {
        server.off('error', reject);
        resolve();
      });
    });
    // Errors of one session (a client that hangs up) must not end the test process.
    server.on('error', () => {});
    this.server = server;
    this.boundPort = ((server as unknown as { server: { address(): AddressInfo } }).server.address()).port;
  }
}
