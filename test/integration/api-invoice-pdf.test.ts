// GET /v1/invoices/{id}/pdf against the real send pipeline (Postgres, Redis, a worker and an SMTP
// server on loopback): the download of a sent invoice is the emailed attachment, byte for byte;
// drafts, paid and void invoices are stamped.
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formatDocumentDate } from '../../src/domain/invoice-format.js';
import type { WorkerRuntime } from '../../src/runtime/worker-runtime.js';
import { startApiFixture, type ApiFixture } from '../helpers/context.js';
import { apiClient, type ApiClient, type JsonBody } from '../helpers/http.js';
import { extractPdfText } from '../helpers/pdf-text.js';
import { recipientsOf, startSmtpSink, type SmtpSink } from '../helpers/smtp-sink.js';
import { startWorker, waitUntil } from '../helpers/worker.js';

let fx: ApiFixture;
let sink: SmtpSink;
let worker: WorkerRuntime;
let api: ApiClient;
const TIME_ZONE = 'Europe/Paris'; // the fixture merchant's zone

beforeAll(async () => {
  sink = await startSmtpSink();
  fx = await startApiFixture({ SMTP_URL: sink.url });
  worker = await startWorker(fx.env.config({ SMTP_URL: sink.url, OUTBOX_RELAY_INTERVAL_MS: '100' }));
  api = apiClient(() => fx.api.app);
});
afterAll(async () => {
  await worker?.close();
  await fx?.close();
  await sink?.close();
});

const key = () => fx.merchant.keys.sandbox;
const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const to = recipientsOf;

async function download(id: string, k = key()) {
  const res = await fx.api.app.inject({ method: 'GET', url: `/v1/invoices/${id}/pdf`, headers: { 'api-key': k } });
  return { status: res.statusCode, type: res.headers['content-type'], disposition: res.headers['content-disposition'], bytes: res.rawPayload, json: () => res.json() };
}
async function draft(email: string, extra: Record<string, unknown> = {}): Promise<JsonBody> {
  const res = await api.post('/v1/invoices', key(), {
    customer_email: email,
    line_items: [{ description: 'Consulting', quantity: 2, unit_amount: '150' }],
    due_at: '2031-05-01T12:00:00Z',
    ...extra,
  });
  expect(res.status, res.raw).toBe(200);
  return res.body.data;
}
async function sendAndReceive(id: string, email: string): Promise<{ sent: JsonBody; attachment: Buffer }> {
  const sent = await api.post(`/v1/invoices/${id}/send`, key());
  expect(sent.status, sent.raw).toBe(200);
  await waitUntil(async () => sink.messages.some((m) => to(m).includes(email)), 20_000, 20);
  const mail = sink.messages.find((m) => to(m).includes(email))!;
  expect(mail.attachments).toHaveLength(1);
  return { sent: sent.body.data, attachment: mail.attachments[0].content };
}

describe('GET /v1/invoices/{id}/pdf', () => {
  it('a sent invoice downloads as the very PDF the customer was emailed (same SHA-256)', async () => {
    const inv = await draft('pdf-same@example.test');
    const { sent, attachment } = await sendAndReceive(inv.id, 'pdf-same@example.test');
    const res = await download(inv.id);
    expect(res.status).toBe(200);
    expect(res.type).toBe('application/pdf');
    expect(res.disposition).toBe(`inline; filename="${sent.code}.pdf"`);
    expect(sha256(res.bytes)).toBe(sha256(attachment));
    // Stable: still the same document when asked again, and once overdue.
    await fx.api.pool.query(`update invoices set status = 'overdue' where id = $1`, [inv.id]);
    expect(sha256((await download(inv.id)).bytes)).toBe(sha256(attachment));
    const text = (await extractPdfText(res.bytes)).join('\n');
    expect(text).toContain(sent.code);
    expect(text).not.toMatch(/DRAFT|PAID|VOID/);
  });

  it('the kept document survives changes the renderer would see: downloaded before the email, attached as is', async () => {
    const email = 'pdf-early@example.test';
    const inv = await draft(email, { customer_name: 'Ada Before' });
    // The worker is paused: the download renders and keeps the document before the send job runs.
    await Promise.all(worker.workers.map((w) => w.pause()));
    const sent = await api.post(`/v1/invoices/${inv.id}/send`, key());
    expect(sent.status).toBe(200);
    const early = await download(inv.id);
    expect(early.status).toBe(200);
    // The customer's name changes (a later invoice for the same address names them anew).
    await draft(email, { customer_name: 'Ada After' });
    await Promise.all(worker.workers.map((w) => w.resume()));
    await waitUntil(async () => sink.messages.some((m) => to(m).includes(email)), 20_000, 20);
    const mail = sink.messages.find((m) => to(m).includes(email))!;
    expect(sha256(mail.attachments[0].content)).toBe(sha256(early.bytes));
    expect((await extractPdfText(early.bytes)).join('\n')).toContain('Ada Before');
  });

  it('an invoice voided before its email went out is never emailed; its owed delivery goes', async () => {
    const email = 'void-before-email@example.test';
    const inv = await draft(email);
    await Promise.all(worker.workers.map((w) => w.pause()));
    expect((await api.post(`/v1/invoices/${inv.id}/send`, key())).status).toBe(200);
    expect((await api.post(`/v1/invoices/${inv.id}/void`, key())).status).toBe(200);
    await Promise.all(worker.workers.map((w) => w.resume()));
    const deliveries = async () => (await fx.api.pool.query('select status from deliveries where invoice_id = $1', [inv.id])).rows;
    await waitUntil(async () => (await deliveries()).length === 0, 20_000, 20);
    // A later invoice to the same address arrives, so the queue has moved past the voided one.
    const later = await draft(email);
    await sendAndReceive(later.id, email);
    expect(sink.messages.filter((m) => to(m).includes(email))).toHaveLength(1);
    const text = (await extractPdfText((await download(inv.id)).bytes)).join('\n');
    expect(text).toContain('VOID');
  });

  it('a draft is a preview marked DRAFT', async () => {
    const inv = await draft('pdf-draft@example.test');
    const res = await download(inv.id);
    expect([res.status, res.type]).toEqual([200, 'application/pdf']);
    const text = (await extractPdfText(res.bytes)).join('\n');
    expect(text).toContain('DRAFT');
    expect(text).toContain('Preview');
    expect(text).toContain('Consulting');
    // No page exists for a draft (made at send): no link to it, nothing to scan.
    expect(text).not.toMatch(/PAY ONLINE|Scan to open|\/pay\//);
    const { rows } = await fx.api.pool.query('select count(*)::int as n from invoice_pdfs where invoice_id = $1', [inv.id]);
    expect(rows[0].n).toBe(0); // a preview is never kept
  });

  it('a draft with no amount yet previews as such, not as a total of 0', async () => {
    const created = await api.post('/v1/invoices', key(), { customer_email: 'pdf-no-amount@example.test' });
    expect(created.status, created.raw).toBe(200);
    expect(created.body.data.amount).toBeNull();
    const res = await download(created.body.data.id);
    expect([res.status, res.type]).toEqual([200, 'application/pdf']);
    const text = (await extractPdfText(res.bytes)).join('\n').replace(/\s+/g, ' ');
    expect(text).toContain('DRAFT');
    expect(text).toContain('No amount or line items yet: set them before sending.');
    expect(text).toContain('Total not set yet');
    expect(text).not.toMatch(/0\.00|Amount due|Amount: 0/);
  });

  it('a paid invoice is marked PAID with its date; a void one VOID', async () => {
    const paid = await draft('pdf-paid@example.test');
    const { attachment } = await sendAndReceive(paid.id, 'pdf-paid@example.test');
    const pay = await api.post(`/v1/test_helpers/invoices/${paid.id}/pay`, key());
    expect(pay.status).toBe(200);
    const paidPdf = await download(paid.id);
    expect(paidPdf.status).toBe(200);
    expect(sha256(paidPdf.bytes)).not.toBe(sha256(attachment));
    const paidText = (await extractPdfText(paidPdf.bytes)).join('\n');
    expect(paidText).toContain('PAID');
    expect(paidText).toContain(`Paid on ${formatDocumentDate(pay.body.data.paid_at, TIME_ZONE)}`);
    expect(paidPdf.disposition).toMatch(/-paid\.pdf"$/);
    // Its page asks for nothing any more: a link to view it, as on a receipt.
    expect(paidText).toContain('VIEW ONLINE');
    expect(paidText).not.toMatch(/PAY ONLINE|Scan to open/);

    const voided = await draft('pdf-void@example.test');
    await sendAndReceive(voided.id, 'pdf-void@example.test');
    expect((await api.post(`/v1/invoices/${voided.id}/void`, key())).status).toBe(200);
    const voidText = (await extractPdfText((await download(voided.id)).bytes)).join('\n');
    expect(voidText).toContain('VOID');
    expect(voidText).toContain('Voided on');
    expect(voidText).not.toContain('PAID');
  });

  // Found by a newcomer's walk: the stamp was English in an otherwise German or French PDF.
  it('the stamp is in the invoice\'s language, like the rest of the document', async () => {
    const voided = await draft('pdf-void-fr@example.test', { customer_locale: 'fr' });
    await sendAndReceive(voided.id, 'pdf-void-fr@example.test');
    expect((await api.post(`/v1/invoices/${voided.id}/void`, key())).status).toBe(200);
    const voidText = (await extractPdfText((await download(voided.id)).bytes)).join('\n');
    expect(voidText).toContain('ANNULÉE · Annulée le');
    expect(voidText).toContain("rien n'est dû");
    expect(voidText).not.toMatch(/VOID|Voided/);
    const preview = (await extractPdfText((await download((await draft('pdf-draft-de@example.test', { customer_locale: 'de' })).id)).bytes)).join('\n');
    expect(preview).toContain('ENTWURF · Vorschau');
    expect(preview).not.toMatch(/DRAFT|Preview/);
  });

  it('another account gets the JSON 404; no key the 401', async () => {
    const inv = await draft('pdf-other@example.test');
    const res = await download(inv.id, fx.merchant.keys.live);
    expect(res.status).toBe(404);
    expect(res.json().error.code).toBe('resource_missing');
    const none = await fx.api.app.inject({ method: 'GET', url: `/v1/invoices/${inv.id}/pdf` });
    expect([none.statusCode, none.json().error.code]).toEqual([401, 'api_key_missing']);
  });
});
