// `customer_locale`: documents (email, PDF) in the customer's language, end to end through the
// API, the worker and a real SMTP server; the customer's stored locale as the default.
import type { ParsedMail } from 'mailparser';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formatDocumentDate } from '../../src/domain/invoice-format.js';
import type { WorkerRuntime } from '../../src/runtime/worker-runtime.js';
import { startApiFixture, type ApiFixture } from '../helpers/context.js';
import { apiClient, expectError } from '../helpers/http.js';
import { extractPdfText } from '../helpers/pdf-text.js';
import { recipientsOf, startSmtpSink, type SmtpSink } from '../helpers/smtp-sink.js';
import { startWorker } from '../helpers/worker.js';

let fx: ApiFixture;
let sink: SmtpSink;
let worker: WorkerRuntime;
const api = apiClient(() => fx.api.app);
const key = () => fx.merchant.keys.sandbox;

beforeAll(async () => {
  sink = await startSmtpSink();
  fx = await startApiFixture({ SMTP_URL: sink.url });
  worker = await startWorker(fx.env.config({ SMTP_URL: sink.url, OUTBOX_RELAY_INTERVAL_MS: '100' }));
});
afterAll(async () => {
  await worker?.close();
  await fx?.close();
  await sink?.close();
});

const to = recipientsOf;

async function mailTo(email: string): Promise<ParsedMail> {
  for (;;) {
    const found = sink.messages.find((m) => to(m).includes(email));
    if (found) return found;
    await sink.waitFor(sink.messages.length + 1, 15_000);
  }
}

async function createAndSend(body: Record<string, unknown>) {
  const created = await api.post('/v1/invoices', key(), { amount: '1234.5', ...body });
  expect(created.status, created.raw).toBe(200);
  const sent = await api.post(`/v1/invoices/${created.body.data.id}/send`, key());
  expect(sent.status, sent.raw).toBe(200);
  return sent.body.data;
}

describe('customer_locale', () => {
  it('a de customer gets German subject, labels and dates in the email and the PDF, marked as a test', async () => {
    const dueAt = '2030-03-05T12:00:00.000Z';
    const inv = await createAndSend({ customer_email: 'jana@example.test', customer_name: 'Jana', customer_locale: 'de', due_at: dueAt });
    const mail = await mailTo('jana@example.test');
    const due = formatDocumentDate(dueAt, 'Europe/Paris', 'de');
    expect(due).toBe('5. März 2030');
    expect(mail.subject).toBe(`Rechnung ${inv.code} von Acme Widgets Ltd`);
    expect(mail.text).toContain('Hallo Jana,');
    expect(mail.text).toContain('Betrag: 1.234,50 USDC auf base-sepolia');
    expect(mail.text).toContain(`Fällig: ${due}`);
    expect(mail.text).toContain('TESTMODUS');
    const pdf = (await extractPdfText(mail.attachments[0].content)).join('\n').replace(/\s+/g, ' ');
    expect(pdf).toContain(`Fällig: ${due}`);
    expect(pdf).toContain('Gesamt 1.234,50 USDC auf base-sepolia');
    expect(pdf).toContain('TESTMODUS: Dies ist ein Test im Testnetzwerk base-sepolia. Es werden keine echten Gelder bewegt.');
    expect(pdf).toContain('Chain-ID: 84532');
  });

  it("the customer's stored locale is the default of their next invoice", async () => {
    await createAndSend({ customer_email: 'pierre@example.test', customer_locale: 'fr' });
    await mailTo('pierre@example.test');
    const second = await api.post('/v1/invoices', key(), { customer_email: 'PIERRE@example.test', amount: '5' });
    const { rows } = await fx.api.pool.query('select customer_locale from invoices where id = $1', [second.body.data.id]);
    expect(rows[0].customer_locale).toBe('fr');
    // Nobody said anything: English.
    const plain = await api.post('/v1/invoices', key(), { customer_email: 'nobody@example.test', amount: '5' });
    const { rows: en } = await fx.api.pool.query('select customer_locale from invoices where id = $1', [plain.body.data.id]);
    expect(en[0].customer_locale).toBe('en');
  });

  it('PATCH while draft changes the language; after send it is refused', async () => {
    const created = await api.post('/v1/invoices', key(), { customer_email: 'ana@example.test', amount: '10', customer_locale: 'de' });
    const id = created.body.data.id;
    expect((await api.patch(`/v1/invoices/${id}`, key(), { customer_locale: 'es' })).status).toBe(200);
    const sent = await api.post(`/v1/invoices/${id}/send`, key());
    const mail = await mailTo('ana@example.test');
    expect(mail.subject).toBe(`Factura ${sent.body.data.code} de Acme Widgets Ltd`);
    expectError(await api.patch(`/v1/invoices/${id}`, key(), { customer_locale: 'fr' }), 400, 'invalid_request_error', 'invoice_not_editable');
  });

  it('an unsupported or malformed locale is 400 unsupported_locale, naming what to use', async () => {
    for (const bad of ['it', 'klingon', 'de_DE_x_', '']) {
      const res = await api.post('/v1/invoices', key(), { customer_email: 'x@example.test', amount: '1', customer_locale: bad });
      expectError(res, 400, 'invalid_request_error', 'unsupported_locale');
      expect(res.body.error.message).toContain('en, de, fr, es');
    }
    const draft = await api.post('/v1/invoices', key(), { customer_email: 'y@example.test', amount: '1' });
    expectError(await api.patch(`/v1/invoices/${draft.body.data.id}`, key(), { customer_locale: 'pt-BR' }), 400, 'invalid_request_error', 'unsupported_locale');
    expectError(await api.patch(`/v1/invoices/${draft.body.data.id}`, key(), { customer_locale: 7 }), 400, 'invalid_request_error', 'validation_failed');
    // A region of a supported language is fine, and kept for Intl.
    const regional = await api.post('/v1/invoices', key(), { customer_email: 'z@example.test', amount: '1', customer_locale: 'de-ch' });
    expect(regional.status).toBe(200);
    const { rows } = await fx.api.pool.query('select customer_locale from invoices where id = $1', [regional.body.data.id]);
    expect(rows[0].customer_locale).toBe('de-CH');
  });

  it('a -u- extension (other digits, another calendar) is dropped: language and region are stored', async () => {
    for (const [given, stored] of [['en-u-nu-hanidec', 'en'], ['de-DE-u-nu-arab', 'de-DE'], ['en-u-ca-islamic', 'en']]) {
      const res = await api.post('/v1/invoices', key(), { customer_email: 'u@example.test', amount: '1', customer_locale: given });
      expect(res.status).toBe(200);
      const { rows } = await fx.api.pool.query('select customer_locale from invoices where id = $1', [res.body.data.id]);
      expect([given, rows[0].customer_locale]).toEqual([given, stored]);
    }
  });
});
