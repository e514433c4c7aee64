import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { simpleParser } from 'mailparser';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { classifySmtpError, createMailTransport, outboxFileName, type MailTransport, type OutgoingMail } from '../../src/mail/transport.js';
import { startSmtpSink, type SmtpSink } from '../helpers/smtp-sink.js';

const pdfBytes = Buffer.from('%PDF-1.3\n% not really a PDF, but bytes that must survive base64\n\u00ff\u0000\u0001', 'latin1');

function mail(overrides: Partial<OutgoingMail> = {}): OutgoingMail {
  return {
    from: 'Invoices <invoices@example.com>',
    to: '"Jane Doe" <jane@example.com>',
    replyTo: 'billing@acme.test',
    subject: 'Invoice INV-000042 from Ακμή & Sons',
    html: '<p>Hello <strong>Jane</strong></p>',
    text: 'Hello Jane',
    messageId: '<delivery-1@example.com>',
    attachments: [{ filename: 'invoice-INV-000042.pdf', content: pdfBytes, contentType: 'application/pdf' }],
    ...overrides,
  };
}

async function rejectionOf(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (err) {
    return err;
  }
  throw new Error('expected the send to fail');
}

/** A port nothing listens on: bind one, then let it go. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe('SMTP transport', () => {
  let sink: SmtpSink;
  let transport: MailTransport;

  beforeAll(async () => {
    sink = await startSmtpSink({
      onRcpt: (address) => (address.startsWith('reject@') ? 550 : address.startsWith('later@') ? 451 : null),
    });
    // One pooled transport for the whole file: smtp-server delays its greeting by ~100 ms.
    transport = createMailTransport({ smtpUrl: sink.url, poolSize: 2, outboxDir: '/nonexistent' });
  });

  afterAll(async () => {
    await transport?.close();
    await sink?.close();
  });

  it('delivers subject, Message-ID, Reply-To, both bodies and the attachment', async () => {
    const before = sink.messages.length;
    const result = await transport.send(mail());
    expect(result.messageId).toBe('<delivery-1@example.com>');
    expect(result.accepted).toEqual(['jane@example.com']);
    expect(result.location).toBeUndefined();

    const [got] = (await sink.waitFor(before + 1)).slice(before);
    expect(got.subject).toBe('Invoice INV-000042 from Ακμή & Sons');
    expect(got.messageId).toBe('<delivery-1@example.com>');
    expect(got.replyTo?.value.map((a) => a.address)).toEqual(['billing@acme.test']);
    expect(got.to && !Array.isArray(got.to) ? got.to.value : []).toEqual([{ address: 'jane@example.com', name: 'Jane Doe' }]);
    expect(got.text?.trim()).toBe('Hello Jane');
    expect(got.html).toContain('<strong>Jane</strong>');
    expect(got.attachments).toHaveLength(1);
    expect(got.attachments[0].filename).toBe('invoice-INV-000042.pdf');
    expect(got.attachments[0].contentType).toBe('application/pdf');
    expect(got.attachments[0].content.equals(pdfBytes)).toBe(true);
  });

  it('sends concurrent messages over the pool', async () => {
    const before = sink.messages.length;
    const ids = Array.from({ length: 6 }, (_, i) => `<parallel-${i}@example.com>`);
    await Promise.all(ids.map((messageId) => transport.send(mail({ messageId, replyTo: undefined }))));
    const got = (await sink.waitFor(before + ids.length)).slice(before);
    expect(got.map((m) => m.messageId).sort()).toEqual([...ids].sort());
    expect(got.every((m) => m.replyTo === undefined)).toBe(true);
  });

  it('a 550 recipient rejection is permanent', async () => {
    const err = await rejectionOf(transport.send(mail({ to: 'reject@example.com', messageId: '<r550@example.com>' })));
    expect(err).toMatchObject({ responseCode: 550 });
    expect(classifySmtpError(err)).toBe('permanent');
  });

  it('a 451 recipient deferral is transient', async () => {
    const err = await rejectionOf(transport.send(mail({ to: 'later@example.com', messageId: '<r451@example.com>' })));
    expect(err).toMatchObject({ responseCode: 451 });
    expect(classifySmtpError(err)).toBe('transient');
  });

  it('still delivers after rejections (the pooled connection was reset, not broken)', async () => {
    const before = sink.messages.length;
    await transport.send(mail({ messageId: '<after-reject@example.com>' }));
    const got = (await sink.waitFor(before + 1)).slice(before);
    expect(got[0].messageId).toBe('<after-reject@example.com>');
  });

  it('a refused connection is transient', async () => {
    const dead = createMailTransport({ smtpUrl: `smtp://127.0.0.1:${await closedPort()}`, poolSize: 1, outboxDir: '/nonexistent' });
    try {
      const err = await rejectionOf(dead.send(mail()));
      expect(classifySmtpError(err)).toBe('transient');
    } finally {
      await dead.close();
    }
  });

  it('close() lets a send in flight finish, then refuses new ones', async () => {
    const own = createMailTransport({ smtpUrl: sink.url, poolSize: 1, outboxDir: '/nonexistent' });
    const before = sink.messages.length;
    const sending = own.send(mail({ messageId: '<in-flight@example.com>' }));
    await own.close();
    await expect(sending).resolves.toMatchObject({ messageId: '<in-flight@example.com>' });
    expect((await sink.waitFor(before + 1)).slice(before)[0].messageId).toBe('<in-flight@example.com>');
    await expect(own.send(mail())).rejects.toThrow(/closed/);
  });
});

describe('file transport (no SMTP_URL)', () => {
  let dir: string;

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'outbox-test-'));
  });

  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('writes a parseable .eml named after the Message-ID, creating the directory', async () => {
    const outboxDir = path.join(dir, 'nested', 'outbox');
    const transport = createMailTransport({ smtpUrl: null, poolSize: 5, outboxDir });
    try {
      const result = await transport.send(mail({ messageId: '<d3f/../evil name@example.com>' }));
      expect(result.messageId).toBe('<d3f/../evil name@example.com>');
      expect(result.accepted).toEqual(['jane@example.com']);
      expect(result.location).toBe(path.join(outboxDir, 'd3f_.._evil_name@example.com.eml'));
      expect(await readdir(outboxDir)).toEqual(['d3f_.._evil_name@example.com.eml']);

      const parsed = await simpleParser(await readFile(result.location!));
      expect(parsed.subject).toBe('Invoice INV-000042 from Ακμή & Sons');
      expect(parsed.messageId).toBe('<d3f/../evil name@example.com>');
      expect(parsed.replyTo?.text).toBe('billing@acme.test');
      expect(parsed.attachments[0].filename).toBe('invoice-INV-000042.pdf');
      expect(parsed.attachments[0].content.equals(pdfBytes)).toBe(true);
    } finally {
      await transport.close();
    }
  });

  it('overwrites the file when the same message is written again (a retried delivery)', async () => {
    const transport = createMailTransport({ smtpUrl: null, poolSize: 5, outboxDir: dir });
    try {
      await transport.send(mail({ messageId: '<same@example.com>', subject: 'first' }));
      const { location } = await transport.send(mail({ messageId: '<same@example.com>', subject: 'second' }));
      expect((await simpleParser(await readFile(location!))).subject).toBe('second');
      expect((await readdir(dir)).filter((f) => f.endsWith('.tmp'))).toEqual([]);
    } finally {
      await transport.close();
    }
  });
});

describe('classifySmtpError', () => {
  it.each([
    [{ responseCode: 550, code: 'EENVELOPE', command: 'RCPT TO' }, 'permanent'],
    [{ responseCode: 552, code: 'EMESSAGE', command: 'DATA' }, 'permanent'],
    [{ responseCode: 554 }, 'permanent'],
    [{ responseCode: 503, code: 'EPROTOCOL' }, 'transient'],
    [{ responseCode: 421, code: 'EENVELOPE' }, 'transient'],
    [{ responseCode: 451 }, 'transient'],
    [{ code: 'EENVELOPE', command: 'API' }, 'permanent'],
    [{ code: 'ECONNECTION' }, 'transient'],
    [{ code: 'ETIMEDOUT' }, 'transient'],
    [{ code: 'ESOCKET', originalCode: 'ECONNREFUSED' }, 'transient'],
    [{ code: 'ECONNRESET' }, 'transient'],
    [new Error('something odd'), 'transient'],
    [null, 'transient'],
    ['a string', 'transient'],
  ])('%j -> %s', (err, expected) => {
    expect(classifySmtpError(err)).toBe(expected);
  });
});

describe('outboxFileName', () => {
  it('drops angle brackets and replaces unsafe characters', () => {
    expect(outboxFileName('<abc-123@example.com>')).toBe('abc-123@example.com.eml');
    expect(outboxFileName('<../../etc/passwd>')).toBe('__.._etc_passwd.eml');
    expect(outboxFileName('<>')).toBe('message.eml');
  });
});
