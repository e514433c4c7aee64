// The one way mail leaves the service: pooled SMTP, or .eml files in the outbox directory
// (development, demos, tests without a mail server). Both speak the same interface, so callers
// never know which one they hold. createMailRouter picks one per environment: live mail goes to
// SMTP_URL, sandbox mail to SANDBOX_SMTP_URL (a capture server such as Mailpit) or the outbox,
// and never to SMTP_URL: a sandbox key must not be able to email the outside world.
import { randomUUID } from 'node:crypto';
import { mkdir, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import nodemailer from 'nodemailer';
import type { NodemailerError, SendMailOptions } from 'nodemailer';

export interface OutgoingAttachment {
  filename: string;
  content: Buffer;
  contentType: string;
}

export interface OutgoingMail {
  from: string;
  to: string;
  replyTo?: string;
  subject: string;
  html: string;
  text: string;
  /** Used verbatim as the Message-ID header, e.g. "<delivery-id@example.com>". */
  messageId: string;
  /**
   * Name of its .eml file in the outbox folder (file transport), without the extension; made
   * filesystem-safe. Unset: the Message-ID. The same message must always get the same name.
   */
  fileName?: string;
  attachments: OutgoingAttachment[];
  /** The environment of the object the mail is about; a router sends sandbox mail to capture only. */
  environment?: MailEnvironment;
}

export type MailEnvironment = 'live' | 'sandbox';

/** Where a message went, as recorded on its delivery. */
export type MailTransportKind = 'smtp' | 'sandbox_smtp' | 'outbox';

export interface SendResult {
  messageId: string;
  accepted: string[];
  /** Path of the written .eml file (file transport only). */
  location?: string;
  transport: MailTransportKind;
  /** The SMTP server (`smtp://host:port`, no credentials) or the .eml file's path. */
  destination: string;
}

export interface MailTransport {
  send(message: OutgoingMail): Promise<SendResult>;
  /** Waits for sends in flight, then releases connections. Later sends reject. */
  close(): Promise<void>;
}

export interface MailTransportOptions {
  smtpUrl: string | null;
  poolSize: number;
  outboxDir: string;
  /** How an SMTP send is recorded; default 'smtp'. */
  smtpKind?: 'smtp' | 'sandbox_smtp';
}

export function createMailTransport(opts: MailTransportOptions): MailTransport {
  return opts.smtpUrl === null ? fileTransport(opts.outboxDir) : smtpTransport(opts.smtpUrl, opts.poolSize, opts.smtpKind ?? 'smtp');
}

export interface MailRouterOptions {
  /** Live mail; null: the outbox. */
  smtpUrl: string | null;
  /** Sandbox mail; null: the outbox. Never falls back to smtpUrl. */
  sandboxSmtpUrl: string | null;
  poolSize: number;
  outboxDir: string;
}

/**
 * One transport per environment. A message without an environment is treated as sandbox: a
 * caller that forgot to say must not reach real inboxes.
 */
export function createMailRouter(opts: MailRouterOptions): MailTransport {
  const outbox = opts.smtpUrl === null || opts.sandboxSmtpUrl === null ? fileTransport(opts.outboxDir) : null;
  const live = opts.smtpUrl === null ? outbox! : smtpTransport(opts.smtpUrl, opts.poolSize, 'smtp');
  const sandbox = opts.sandboxSmtpUrl === null ? outbox! : smtpTransport(opts.sandboxSmtpUrl, opts.poolSize, 'sandbox_smtp');
  const all = [...new Set([live, sandbox])];
  return {
    send: (message) => (message.environment === 'live' ? live : sandbox).send(message),
    async close() {
      await Promise.all(all.map((t) => t.close()));
    },
  };
}

/** `smtp://user:pass@host:port?x=y` -> `smtp://host:port`: what a delivery records. */
export function smtpDestination(url: string): string {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.host}`;
  } catch {
    return 'smtp';
  }
}

function toNodemailer(message: OutgoingMail): SendMailOptions {
  return {
    from: message.from,
    to: message.to,
    ...(message.replyTo ? { replyTo: message.replyTo } : {}),
    subject: message.subject,
    html: message.html,
    text: message.text,
    messageId: message.messageId,
    attachments: message.attachments.map((a) => ({ filename: a.filename, content: a.content, contentType: a.contentType })),
  };
}

/**
 * Tracks sends in flight so close() can let them finish: nodemailer's pool close() only spares a
 * connection that is mid-delivery, it does not tell us when that delivery ends.
 */
function withGracefulClose(send: (m: OutgoingMail) => Promise<SendResult>, release: () => void): MailTransport {
  const inFlight = new Set<Promise<unknown>>();
  let closed = false;
  return {
    send(message) {
      if (closed) return Promise.reject(new Error('mail transport is closed'));
      const p = send(message);
      const tracked = p.catch(() => undefined);
      inFlight.add(tracked);
      void tracked.finally(() => inFlight.delete(tracked));
      return p;
    },
    async close() {
      if (closed) return;
      closed = true;
      await Promise.all(inFlight);
      release();
    },
  };
}

function smtpTransport(url: string, poolSize: number, kind: 'smtp' | 'sandbox_smtp'): MailTransport {
  const destination = smtpDestination(url);
  const transporter = nodemailer.createTransport({
    url,
    pool: true,
    maxConnections: poolSize,
    // nodemailer's defaults (2 min to connect, 10 min idle socket) would park a worker slot for
    // minutes on a dead server; a failed attempt is retried by the queue anyway. Query
    // parameters of SMTP_URL (e.g. ?socketTimeout=120000) still override these.
    connectionTimeout: 15_000,
    greetingTimeout: 15_000,
    socketTimeout: 60_000,
  });
  return withGracefulClose(
    async (message) => {
      const info = await transporter.sendMail(toNodemailer(message));
      return { messageId: info.messageId, accepted: info.accepted.map(String), transport: kind, destination };
    },
    () => transporter.close(),
  );
}

/** A message's file name (or Message-ID: "<", ">" and whatever the id generator used), made safe. */
export function outboxFileName(name: string): string {
  const base = name
    .replace(/^<|>$/g, '')
    .replace(/[^A-Za-z0-9._@+-]/g, '_')
    .replace(/^\.+/, '_')
    .slice(0, 200);
  return `${base || 'message'}.eml`;
}

function fileTransport(outboxDir: string): MailTransport {
  const transporter = nodemailer.createTransport({ streamTransport: true, buffer: true });
  return withGracefulClose(
    async (message) => {
      const info = await transporter.sendMail(toNodemailer(message));
      if (!Buffer.isBuffer(info.message)) throw new Error('stream transport returned a stream despite buffer: true');
      await mkdir(outboxDir, { recursive: true });
      const location = path.resolve(outboxDir, outboxFileName(message.fileName ?? message.messageId));
      // Write then rename: a reader (a person, a test polling the directory) never sees half a
      // message, and a crash leaves at most a stray .tmp file.
      const tmp = `${location}.${process.pid}.${randomUUID()}.tmp`;
      try {
        await writeFile(tmp, info.message);
        await rename(tmp, location);
      } catch (err) {
        await rm(tmp, { force: true });
        throw err;
      }
      return { messageId: info.messageId, accepted: info.envelope.to.map(String), location, transport: 'outbox', destination: location };
    },
    () => transporter.close(),
  );
}

/** Codes of errors that concern this message itself, found before anything reached a server. */
const PERMANENT_LOCAL_CODES = new Set(['EENVELOPE']);

/**
 * Whether retrying the same message can succeed. A 5xx SMTP reply ("550 no such user") is
 * permanent, except 503 (bad sequence of commands: the session, not the message, was wrong);
 * 4xx replies, connection failures and timeouts are transient. So is anything unrecognised:
 * retrying a permanent failure a few times is cheap, dropping a deliverable email is not.
 */
export function classifySmtpError(err: unknown): 'transient' | 'permanent' {
  if (typeof err !== 'object' || err === null) return 'transient';
  const e = err as Partial<NodemailerError>;
  if (typeof e.responseCode === 'number') {
    return e.responseCode >= 500 && e.responseCode < 600 && e.responseCode !== 503 ? 'permanent' : 'transient';
  }
  // nodemailer rejects a malformed envelope (a recipient containing CR/LF or "<>", no
  // recipient at all) locally, with command "API" and no reply code; resending cannot fix it.
  if (e.code !== undefined && PERMANENT_LOCAL_CODES.has(e.code) && e.command === 'API') return 'permanent';
  return 'transient';
}
