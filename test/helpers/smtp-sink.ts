// An in-process SMTP server for the tests and the benchmarks: accepts everything (or rejects
// chosen recipients with a chosen reply code), records when each recipient's message was accepted,
// and parses each message with mailparser as it arrives (unless told not to: a benchmark measures
// the service's CPU, not the parser's).
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
  /** Parse each message into `messages` (default true); false keeps counts and arrival times only. */
  parse?: boolean;
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
  /** performance.now() of acceptance (the 250 reply to DATA), per recipient address (lower-cased). */
  arrivals: Map<string, number>;
  /** Messages accepted, and their bytes, parsed or not. */
  count(): number;
  bytes(): number;
  /** Resolves once every address is in `arrivals`. */
  waitForAll(addresses: string[], timeoutMs: number): Promise<void>;
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
  const arrivals = new Map<string, number>();
  let accepted = 0;
  let acceptedBytes = 0;
  const waiters = new Set<() => void>();
  const parse = opts.parse ?? true;
  // Parses run one after another so `messages` keeps arrival order.
  let parsing: Promise<void> = Promise.resolve();

  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    disableReverseLookup: true,
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
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      let size = 0;
      stream.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (parse) chunks.push(chunk);
      });
      stream.on('error', callback);
      stream.on('end', () => {
        const now = performance.now();
        accepted++;
        acceptedBytes += size;
        for (const rcpt of session.envelope.rcptTo) arrivals.set(rcpt.address.toLowerCase(), now);
        if (parse) {
          const raw = Buffer.concat(chunks);
          parsing = parsing.then(async () => {
            const parsed = await simpleParser(raw);
            arrivedAt.set(parsed, Date.now());
            messages.push(parsed);
            for (const wake of waiters) wake();
          });
        }
        callback();
        for (const wake of waiters) wake();
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
    arrivals,
    count: () => accepted,
    bytes: () => acceptedBytes,
    waitForAll(addresses, timeoutMs) {
      const missing = () => addresses.filter((a) => !arrivals.has(a.toLowerCase())).length;
      if (missing() === 0) return Promise.resolve();
      return new Promise((resolve, reject) => {
        let pending = missing();
        const wake = () => {
          // Cheap check first; recount only when the count could have reached zero.
          if (--pending > 0) return;
          pending = missing();
          if (pending > 0) return;
          clearTimeout(timer);
          waiters.delete(wake);
          resolve();
        };
        const timer = setTimeout(() => {
          waiters.delete(wake);
          reject(new Error(`smtp sink: ${missing()} of ${addresses.length} messages still missing after ${timeoutMs} ms`));
        }, timeoutMs);
        waiters.add(wake);
      });
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
