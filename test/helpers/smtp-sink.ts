// An in-process SMTP server for tests: accepts everything (or rejects chosen recipients with a
// chosen reply code) and parses each message with mailparser as it arrives.
import { simpleParser, type ParsedMail } from 'mailparser';
import { SMTPServer } from 'smtp-server';
import type { AddressInfo } from 'node:net';

export interface SmtpSinkOptions {
  /** Reply code to reject this recipient with (e.g. 550, 451), or null to accept. */
  onRcpt?: (address: string) => number | null;
  /** Listen on this port (to bring a sink "back up" where a client expects it); default: any free port. */
  port?: number;
  /** Hold each RCPT TO this long before answering (to catch a client mid-conversation). */
  rcptDelayMs?: number;
}

export interface SmtpSink {
  port: number;
  url: string;
  /** Parsed messages, in the order they arrived. */
  messages: ParsedMail[];
  /** When each message was stored (Date.now()), for tests that time arrivals against a plan. */
  arrivedAt: ReadonlyMap<ParsedMail, number>;
  /** Every RCPT TO address as the client sent it, before any delay or answer: a client is mid-conversation. */
  recipientsSeen: string[];
  /** Resolves with the messages once at least n have arrived. */
  waitFor(n: number, timeoutMs?: number): Promise<ParsedMail[]>;
  close(): Promise<void>;
}

/** Every To address of a message. */
export function recipientsOf(m: ParsedMail): string[] {
  return (Array.isArray(m.to) ? m.to : [m.to]).flatMap((a) => a?.value.map((v) => v.address ?? '') ?? []);
}

export async function startSmtpSink(opts: SmtpSinkOptions = {}): Promise<SmtpSink> {
  const messages: ParsedMail[] = [];
  const arrivedAt = new Map<ParsedMail, number>();
  const recipientsSeen: string[] = [];
  const waiters = new Set<() => void>();
  // Parses run one after another so `messages` keeps arrival order.
  let parsing: Promise<void> = Promise.resolve();

  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    logger: false,
    // Tests close their clients first; don't wait the default 30 s for stragglers.
    closeTimeout: 500,
    onRcptTo(address, _session, callback) {
      recipientsSeen.push(address.address);
      const answer = () => {
        const code = opts.onRcpt?.(address.address) ?? null;
        if (code === null) return callback();
        const err = Object.assign(new Error(`${code} recipient ${address.address} rejected by the test sink`), { responseCode: code });
        callback(err);
      };
      if (opts.rcptDelayMs) setTimeout(answer, opts.rcptDelayMs);
      else answer();
    },
    onData(stream, _session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      stream.on('error', callback);
      stream.on('end', () => {
        const raw = Buffer.concat(chunks);
        parsing = parsing.then(async () => {
          const parsed = await simpleParser(raw);
          arrivedAt.set(parsed, Date.now());
          messages.push(parsed);
          for (const wake of waiters) wake();
        });
        callback();
      });
    },
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, '127.0.0.1', () => resolve());
  });
  // A client that dies mid-conversation (a SIGKILLed worker) resets its socket: not a test failure.
  server.on('error', () => undefined);
  const { port } = server.server.address() as AddressInfo;

  return {
    port,
    url: `smtp://127.0.0.1:${port}`,
    messages,
    arrivedAt,
    recipientsSeen,
    waitFor(n, timeoutMs = 5_000) {
      if (messages.length >= n) return Promise.resolve(messages);
      return new Promise((resolve, reject) => {
        const wake = () => {
          if (messages.length < n) return;
          clearTimeout(timer);
          waiters.delete(wake);
          resolve(messages);
        };
        const timer = setTimeout(() => {
          waiters.delete(wake);
          reject(new Error(`smtp sink: ${messages.length} of ${n} messages after ${timeoutMs} ms`));
        }, timeoutMs);
        waiters.add(wake);
      });
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
