// Documents in the customer's language, sandbox documents marked as tests, and the payment terms
// on the PDF (chain id, token contract, a QR code of the payment page that decodes to its URL).
import { describe, expect, it } from 'vitest';
import { negotiateLocale, parseLocale, templateLanguage } from '../../src/domain/locale.js';
import { loadCatalogues, messagesFor } from '../../src/i18n/messages.js';
import { renderEmail } from '../../src/mail/render-email.js';
import { formatDocumentDate, formatTokenAmount } from '../../src/domain/invoice-format.js';
import type { InvoiceDocument } from '../../src/domain/invoice-document.js';
import { renderInvoicePdf } from '../../src/pdf/invoice-pdf.js';
import { renderReceiptPdf } from '../../src/pdf/receipt-pdf.js';
import { extractPdfText } from '../helpers/pdf-text.js';
import { decodeQrInPdf, hasPdftoppm } from '../helpers/qr.js';

const USDC_BASE_SEPOLIA = '0x036CbD53842c5426634e7929541eC2318f3dCF7e';

function invoice(overrides: Partial<InvoiceDocument> = {}): InvoiceDocument {
  return {
    invoiceId: 'inv_test',
    code: 'TEST-INV-000007',
    reference: 'Ab12Cd34Ef56Gh78Ij90',
    merchant: { name: 'Acme GmbH', email: 'billing@acme.test' },
    customer: { name: 'Jana Müller', email: 'jana@example.test' },
    issuedAt: '2026-11-21T10:00:00.000Z',
    dueAt: '2026-12-03T10:00:00.000Z',
    timeZone: 'Europe/Berlin',
    amount: '1234.5',
    currency: 'USDC',
    tokenDecimals: 6,
    network: 'base-sepolia',
    chainId: 84532,
    lines: [{ description: 'Beratung', quantity: 1, unitAmount: '1234.5', lineTotal: '1234.5' }],
    memo: null,
    footer: null,
    taxId: null,
    payUrl: 'http://localhost:3000/pay/Ab12Cd34Ef56Gh78Ij90',
    locale: 'en',
    testMode: false,
    tokenAddress: USDC_BASE_SEPOLIA,
    paidAt: '2026-11-25T08:30:00.000Z',
    ...overrides,
  };
}

const flat = (pages: string[]) => pages.join('\n').replace(/\s+/g, ' ');

describe('locales', () => {
  it('accepts the supported languages, with a region, canonicalised; refuses the rest', () => {
    expect(['en', 'de', 'fr', 'es'].map(parseLocale)).toEqual(['en', 'de', 'fr', 'es']);
    expect(parseLocale('de-at')).toBe('de-AT');
    expect(parseLocale('FR_ca')).toBe('fr-CA');
    for (const bad of ['xx', 'it', 'zh-CN', '', 'de--', '../en', 'en,de']) expect(parseLocale(bad)).toBeNull();
    expect(templateLanguage('de-CH')).toBe('de');
  });

  it('keeps language and region only: extensions, scripts and variants never reach Intl', () => {
    for (const [given, kept] of [
      ['en-u-nu-hanidec', 'en'],
      ['de-DE-u-nu-arab', 'de-DE'],
      ['en-u-ca-islamic', 'en'],
      ['fr-CA-u-ca-buddhist-nu-thai', 'fr-CA'],
      ['es-419-x-private', 'es-419'],
      ['de-Latn-CH-1996', 'de-CH'],
      ['en-t-ja', 'en'],
    ]) expect([given, parseLocale(given)]).toEqual([given, kept]);
    expect(negotiateLocale('de-DE-u-nu-arab')).toBe('de-DE');
    expect(templateLanguage(null)).toBe('en');
  });

  it('negotiates Accept-Language by quality', () => {
    expect(negotiateLocale('it-IT, fr;q=0.8, de;q=0.9')).toBe('de');
    expect(negotiateLocale('zh, *;q=0.1')).toBeNull();
    expect(negotiateLocale(undefined)).toBeNull();
  });

  it('every catalogue has every English phrase', () => {
    expect(loadCatalogues()).toEqual({ en: [], de: [], fr: [], es: [] });
  });

  it('formats amounts and dates the locale way (Intl), exactly', () => {
    expect(formatTokenAmount('1234567.5', 6, 'de')).toBe('1.234.567,50');
    expect(formatTokenAmount('1234567.5', 6, 'fr')).toMatch(/^1\s234\s567,50$/);
    expect(formatTokenAmount('999999999999999.999999', 6, 'de')).toBe('999.999.999.999.999,999999');
    expect(formatTokenAmount('1234.5', 6, 'en')).toBe('1,234.50');
    expect(formatDocumentDate('2026-12-03T10:00:00Z', 'Europe/Berlin', 'de')).toBe('3. Dez. 2026');
    expect(formatDocumentDate('2026-12-03T10:00:00Z', 'Europe/Berlin', 'fr')).toBe('3 déc. 2026');
    expect(formatDocumentDate('2026-12-03T10:00:00Z', 'Europe/Berlin', 'es')).toBe('3 dic 2026');
  });

  it('falls back to English for a phrase a catalogue lacks', () => {
    expect(messagesFor('de').t('label.amount')).toBe('Betrag');
    expect(messagesFor('pt').t('label.amount')).toBe('Amount');
  });
});

describe('emails in the customer language', () => {
  it('a de customer gets German subject, labels, dates and amounts', () => {
    const doc = invoice({ locale: 'de' });
    const email = renderEmail('invoice', doc);
    expect(email.subject).toBe('Rechnung TEST-INV-000007 von Acme GmbH');
    expect(email.text).toContain('Hallo Jana Müller,');
    expect(email.text).toContain('Betrag: 1.234,50 USDC auf base-sepolia');
    expect(email.text).toContain('Fällig: 3. Dez. 2026');
    expect(email.html).toContain('<html lang="de">');
    expect(email.html).toContain('Rechnung bezahlen');
    expect(renderEmail('reminder_before', doc).subject).toBe('Erinnerung: Rechnung TEST-INV-000007 ist am 3. Dez. 2026 fällig');
    expect(renderEmail('receipt', doc).subject).toBe('Zahlung erhalten: Rechnung TEST-INV-000007 von Acme GmbH');
  });

  it.each([
    ['fr', 'Facture TEST-INV-000007 de Acme GmbH', 'Montant : '],
    ['es', 'Factura TEST-INV-000007 de Acme GmbH', 'Importe: 1234,50 USDC en base-sepolia'],
  ])('%s subject and labels', (locale, subject, label) => {
    const email = renderEmail('invoice', invoice({ locale }));
    expect(email.subject).toBe(subject);
    expect(email.text.replace(/\u202f|\u00a0/g, ' ')).toContain(label.replace(' : ', ': '));
  });

  it('a sandbox email says, in text and HTML, that it is a test and no real funds move; a live one does not', () => {
    for (const kind of ['invoice', 'reminder_before', 'reminder_after', 'receipt'] as const) {
      const sandbox = renderEmail(kind, invoice({ testMode: true }));
      for (const body of [sandbox.text, sandbox.html]) {
        expect(body).toContain('TEST MODE: this is a test on the base-sepolia test network. No real funds move.');
      }
      const live = renderEmail(kind, invoice({ testMode: false }));
      expect(live.text + live.html).not.toContain('TEST MODE');
    }
    expect(renderEmail('invoice', invoice({ testMode: true, locale: 'de' })).text).toContain('Es werden keine echten Gelder bewegt.');
  });

  it('the receipt email names the invoice, the amount paid, the network and the paid date', () => {
    const { text, html } = renderEmail('receipt', invoice());
    expect(text).toContain('Invoice: TEST-INV-000007');
    expect(text).toContain('Amount paid: 1,234.50 USDC on base-sepolia');
    expect(text).toContain('Paid: 25 Nov 2026');
    expect(html).not.toContain('Pay invoice');
  });
});

describe('PDF in the customer language, with the payment terms', () => {
  it('a de PDF has German labels, dates and amounts', async () => {
    const text = flat(await extractPdfText(await renderInvoicePdf(invoice({ locale: 'de' }))));
    expect(text).toContain('Rechnung');
    expect(text).toContain('Ausgestellt: 21. Nov. 2026');
    expect(text).toContain('Fällig: 3. Dez. 2026');
    expect(text).toContain('Beschreibung');
    expect(text).toContain('Gesamt 1.234,50 USDC auf base-sepolia');
    expect(text).toContain('Seite 1 von 1');
  });

  it('prints the chain id and the token contract address', async () => {
    const text = flat(await extractPdfText(await renderInvoicePdf(invoice())));
    expect(text).toContain('Chain id: 84532');
    expect(text).toContain(`Token contract: ${USDC_BASE_SEPOLIA}`);
  });

  it('says on every page of a sandbox PDF that it is a test and no real funds move', async () => {
    const lines = Array.from({ length: 120 }, (_, i) => ({ description: `Item ${i + 1}`, quantity: 1, unitAmount: '1', lineTotal: '1' }));
    const pages = await extractPdfText(await renderInvoicePdf(invoice({ testMode: true, lines, amount: '120' })));
    expect(pages.length).toBeGreaterThan(2);
    for (const page of pages) expect(page.replace(/\s+/g, ' ')).toContain('TEST MODE: this is a test on the base-sepolia test network. No real funds move.');
    const live = await extractPdfText(await renderInvoicePdf(invoice({ testMode: false })));
    expect(flat(live)).not.toContain('TEST MODE');
  });

  it('the receipt PDF has amount, token, network, paid date and invoice code', async () => {
    const text = flat(await extractPdfText(await renderReceiptPdf(invoice({ testMode: true }))));
    expect(text).toContain('Receipt');
    expect(text).toContain('TEST-INV-000007');
    expect(text).toContain('Paid 1,234.50 USDC on base-sepolia');
    expect(text).toContain('Paid: 25 Nov 2026');
    expect(text).toContain('TEST MODE');
    expect(text).toContain('VIEW ONLINE');
    expect(text).not.toContain('PAY ONLINE');
    await expect(renderReceiptPdf(invoice({ paidAt: null }))).rejects.toThrow(/paidAt/);
  });

  it('carries a QR code that decodes to exactly the payment page URL', async (ctx) => {
    if (!(await hasPdftoppm())) ctx.skip('pdftoppm (poppler-utils) is not installed: apt-get install -y poppler-utils');
    const url = 'http://localhost:3000/pay/Zz98Yy76Xx54Ww32Vv10';
    expect(await decodeQrInPdf(await renderInvoicePdf(invoice({ payUrl: url })))).toBe(url);
    expect(await decodeQrInPdf(await renderReceiptPdf(invoice({ payUrl: url, locale: 'fr' })))).toBe(url);
  });
});
