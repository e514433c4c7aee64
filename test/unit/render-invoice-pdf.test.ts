import { Decimal } from 'decimal.js';
import { getDocument } from 'pdfjs-dist/legacy/build/pdf.mjs';
import { describe, expect, it, vi } from 'vitest';
import type { InvoiceDocument, InvoiceDocumentLine } from '../../src/domain/invoice-document.js';
import { formatDocumentDate, formatTokenAmount } from '../../src/domain/invoice-format.js';
import { renderInvoicePdf } from '../../src/pdf/invoice-pdf.js';
import { renderReceiptPdf } from '../../src/pdf/receipt-pdf.js';
import { extractPdfText } from '../helpers/pdf-text.js';

function line(n: number, description = `Consulting block ${n}`): InvoiceDocumentLine {
  return { description, quantity: n, unitAmount: '10.5', lineTotal: new Decimal('10.5').times(n).toFixed() };
}

function invoice(overrides: Partial<InvoiceDocument> = {}): InvoiceDocument {
  return {
    invoiceId: '0b9d5e3c-1d2a-4c4e-9a53-2f0e7c1d8a11',
    code: 'INV-000042',
    reference: 'ref_8f3k2',
    merchant: { name: 'Acme Widgets Ltd', email: 'billing@acme.test' },
    customer: { name: 'Jane Doe', email: 'jane@example.com' },
    issuedAt: '2026-11-21T10:00:00.000Z',
    dueAt: '2026-12-21T10:00:00.000Z',
    timeZone: 'Europe/Berlin',
    amount: '1234.5',
    currency: 'USDC',
    tokenDecimals: 6,
    network: 'base-sepolia',
    chainId: 84532,
    lines: [
      { description: 'Design work', quantity: 2, unitAmount: '500', lineTotal: '1000' },
      {
        description: 'Hosting, November, including a rather long explanation of what was hosted so that the description wraps',
        quantity: 1,
        unitAmount: '234.5',
        lineTotal: '234.5',
      },
    ],
    memo: 'Thank you for your business.',
    footer: 'Acme Widgets Ltd, 1 Example Street, Berlin',
    taxId: null,
    payUrl: 'https://pay.example.com/pay/ref_8f3k2',
    ...overrides,
  };
}

/** Whitespace-insensitive: wrapped table cells come back with line breaks inside. */
const flat = (pages: string[]) => pages.join('\n').replace(/\s+/g, ' ');

describe('renderInvoicePdf content', () => {
  it('prints the code, parties, dates, every line, the total, memo, footer and pay link', async () => {
    const doc = invoice();
    const pdf = await renderInvoicePdf(doc);
    expect(pdf.subarray(0, 5).toString('latin1')).toBe('%PDF-');
    const pages = await extractPdfText(pdf);
    const text = flat(pages);
    expect(text).toContain('INV-000042');
    expect(text).toContain('Acme Widgets Ltd');
    expect(text).toContain('billing@acme.test');
    expect(text).toContain('Jane Doe');
    expect(text).toContain('jane@example.com');
    expect(text).toContain('21 Nov 2026');
    expect(text).toContain('21 Dec 2026');
    for (const l of doc.lines) expect(text).toContain(l.description);
    expect(text).toContain('1,000.00');
    expect(text).toContain('Total 1,234.50 USDC on base-sepolia');
    expect(text).toContain('Thank you for your business.');
    expect(text).toContain('Acme Widgets Ltd, 1 Example Street, Berlin');
    expect(text).toContain('https://pay.example.com/pay/ref_8f3k2');
    expect(text).not.toContain('Tax ID');
  });

  it('prints the settlement address and the payment reference beside the token, and how to pay, when the invoice has them', async () => {
    const onChain = { to: '0x23618e81E3f5cdF7f54C3d65f7FBc0aBf5B21E8f', paymentReference: '0x1a2b3c4d5e6f7a8b', viaProxy: true };
    const text = flat(await extractPdfText(await renderInvoicePdf(invoice({ tokenAddress: '0x036CbD53842c5426634e7929541eC2318f3dCF7e', onChain }))));
    // Without payment instructions (a chain without a fee proxy) only the plain transfer is offered.
    const plain = flat(await extractPdfText(await renderInvoicePdf(invoice({ onChain: { ...onChain, viaProxy: false } }))));
    expect(plain).not.toContain('fee proxy');
    expect(plain).toContain('Pay by plain transfer of exactly this amount to this address.');
    expect(text).toContain('Token contract: 0x036CbD53842c5426634e7929541eC2318f3dCF7e');
    expect(text).toContain(`Pay to: ${onChain.to}`);
    expect(text).toContain(`Payment reference: ${onChain.paymentReference}`);
    expect(text).toContain('Pay through the fee proxy with this reference');
    expect(text).toContain('by plain transfer of exactly this amount to this address');
    const without = flat(await extractPdfText(await renderInvoicePdf(invoice())));
    expect(without).not.toContain('Payment reference');
    expect(without).not.toContain('Pay to');
  });

  it('a receipt names every payment that made up the total, each transaction linked to the explorer when the chain has one', async () => {
    const txHash = `0x${'ab'.repeat(32)}`;
    const url = `https://explorer.example.test/tx/${txHash}`;
    const paid = { paidAt: '2026-11-25T08:00:00.000Z', onChain: { to: '0x23618e81E3f5cdF7f54C3d65f7FBc0aBf5B21E8f', paymentReference: '0x1a2b3c4d5e6f7a8b' } };
    const second = `0x${'cd'.repeat(32)}`;
    const linked = await renderReceiptPdf(invoice({ ...paid, payments: [{ amount: '500', txHash, url }, { amount: '734.5', txHash: second, url: null }] }));
    // A hash may wrap by character in the narrow column: compared without whitespace. Every
    // payment of a split payment is listed, with what it counted.
    expect(flat(await extractPdfText(linked)).replace(/ /g, '')).toContain(`Transaction:${txHash}(500.00USDC)`);
    expect(flat(await extractPdfText(linked)).replace(/ /g, '')).toContain(`Transaction:${second}(734.50USDC)`);
    // The receipt asks for nothing: no payment instructions on it.
    expect(flat(await extractPdfText(linked))).not.toContain('Payment reference');
    const task = getDocument({ data: new Uint8Array(linked), verbosity: 0 });
    const pdf = await task.promise;
    try {
      const annotations = (await (await pdf.getPage(pdf.numPages)).getAnnotations()) as { subtype: string; url?: string }[];
      expect(annotations.filter((a) => a.subtype === 'Link').map((a) => a.url)).toContain(url);
    } finally {
      await task.destroy();
    }
    const unlinked = await renderReceiptPdf(invoice({ ...paid, payments: [{ amount: '1234.5', txHash, url: null }] }));
    expect(flat(await extractPdfText(unlinked)).replace(/ /g, '')).toContain(`Transaction:${txHash}`);
    const plain = getDocument({ data: new Uint8Array(unlinked), verbosity: 0 });
    try {
      const page = await (await plain.promise).getPage(1);
      const annotations = (await page.getAnnotations()) as { subtype: string; url?: string }[];
      expect(annotations.map((a) => a.url)).not.toContain(url);
    } finally {
      await plain.destroy();
    }
  });

  it('prints the tax id only when there is one', async () => {
    const text = flat(await extractPdfText(await renderInvoicePdf(invoice({ taxId: 'DE123456789' }))));
    expect(text).toContain('Tax ID: DE123456789');
  });

  it('makes the pay link a clickable URI annotation', async () => {
    const task = getDocument({ data: new Uint8Array(await renderInvoicePdf(invoice())), verbosity: 0 });
    const pdf = await task.promise;
    try {
      const annotations = (await (await pdf.getPage(pdf.numPages)).getAnnotations()) as { subtype: string; url?: string }[];
      expect(annotations.filter((a) => a.subtype === 'Link').map((a) => a.url)).toContain('https://pay.example.com/pay/ref_8f3k2');
    } finally {
      await task.destroy();
    }
  });

  it('keeps Greek and Cyrillic extractable (embedded DejaVu Sans, not a standard font)', async () => {
    const pdf = await renderInvoicePdf(
      invoice({
        merchant: { name: 'Дмитрий Иванов', email: null },
        customer: { name: 'Αθηνά Παπαδοπούλου', email: 'athena@example.gr' },
        lines: [line(1, 'Μελέτη σκοπιμότητας'), line(2, 'Консультация по проекту')],
      }),
    );
    const text = flat(await extractPdfText(pdf));
    expect(text).toContain('Αθηνά Παπαδοπούλου');
    expect(text).toContain('Дмитрий Иванов');
    expect(text).toContain('Μελέτη σκοπιμότητας');
    expect(text).toContain('Консультация по проекту');
    const raw = pdf.toString('latin1');
    expect(raw).toMatch(/\/FontName \/[A-Z]{6}\+DejaVuSans\b/);
    expect(raw).toMatch(/\/FontName \/[A-Z]{6}\+DejaVuSans-Bold\b/);
    expect(raw).not.toContain('/Helvetica');
  });

  // Wrapped, "999,998,999.000001" read as "999,998,999.00000" over a stray "1": a different amount.
  it('keeps every amount and quantity of the table on one line, however long (smaller type, never wrapped)', async () => {
    const cases: Partial<InvoiceDocument>[] = [
      { lines: [{ description: 'Bulk', quantity: 999999, unitAmount: '999.999999', lineTotal: '999998999.000001' }], amount: '999998999.000001' },
      {
        currency: 'DAI',
        tokenDecimals: 18,
        lines: [{ description: 'Fine-grained', quantity: 3, unitAmount: '0.123456789012345678', lineTotal: '0.370370367037037034' }],
        amount: '0.370370367037037034',
      },
    ];
    for (const overrides of cases) {
      const doc = invoice(overrides);
      const lines = (await extractPdfText(await renderInvoicePdf(doc))).join('').split('\n');
      for (const l of doc.lines) {
        for (const value of [formatTokenAmount(l.unitAmount, doc.tokenDecimals), formatTokenAmount(l.lineTotal, doc.tokenDecimals)]) {
          expect(lines.some((text) => text.includes(value)), `${value} on one line in:\n${lines.join('\n')}`).toBe(true);
        }
      }
    }
  });

  it('paginates a 300-line invoice and repeats the table header on every page', async () => {
    const lines = Array.from({ length: 300 }, (_, i) => line(i + 1, `Item number ${i + 1} of the big order`));
    const pages = await extractPdfText(await renderInvoicePdf(invoice({ lines, amount: '473917.5' })));
    expect(pages.length).toBeGreaterThan(1);
    pages.forEach((page, i) => {
      expect(page).toContain('Description');
      expect(page).toContain(`Page ${i + 1} of ${pages.length}`);
    });
    const text = flat(pages);
    for (const l of lines) expect(text).toContain(`${l.description} `);
    // Each line printed exactly once, in order, none lost at a page break.
    const numbers = [...text.matchAll(/Item number (\d+) of/g)].map((m) => Number(m[1]));
    expect(numbers).toEqual(lines.map((_, i) => i + 1));
    expect(flat(pages.slice(-1))).toContain('Total 473,917.50 USDC on base-sepolia');
  });
});

describe('renderInvoicePdf determinism', () => {
  it('renders the same document to the same bytes', async () => {
    const a = await renderInvoicePdf(invoice());
    const b = await renderInvoicePdf(invoice());
    expect(a.equals(b)).toBe(true);
  });

  it('renders a different document to different bytes and a different /ID', async () => {
    const a = await renderInvoicePdf(invoice());
    const b = await renderInvoicePdf(invoice({ invoiceId: 'c6a1b7d0-0000-4000-8000-000000000001', code: 'INV-000043' }));
    expect(a.equals(b)).toBe(false);
    const id = (buf: Buffer) => /\/ID \[<([0-9a-f]+)> <\1>\]/.exec(buf.toString('latin1'))?.[1];
    expect(id(a)).toMatch(/^[0-9a-f]{32}$/);
    expect(id(b)).toMatch(/^[0-9a-f]{32}$/);
    expect(id(a)).not.toBe(id(b));
  });

  it('dates the file from issuedAt, not from the clock', async () => {
    const raw = (await renderInvoicePdf(invoice())).toString('latin1');
    expect(raw).toContain('(D:20261121100000Z)');
  });

  it('does not depend on what the process rendered before', async () => {
    // The parsed fonts are shared between renders. "ή" embeds "η" as a composite component; if
    // that left a glyph without code points in a shared cache, a later invoice's "η" would lose
    // its ToUnicode entry, and the bytes would differ from a cold render.
    const greek = invoice({ customer: { name: 'Αθηνά Παπαδοπούλου', email: 'a@example.gr' } });
    vi.resetModules();
    const cold = await (await import('../../src/pdf/invoice-pdf.js')).renderInvoicePdf(greek);
    vi.resetModules();
    const fresh = await import('../../src/pdf/invoice-pdf.js');
    await fresh.renderInvoicePdf(invoice({ merchant: { name: 'Ακμή', email: null }, customer: { name: 'Ζωή', email: 'z@example.gr' } }));
    const warm = await fresh.renderInvoicePdf(greek);
    expect(warm.equals(cold)).toBe(true);
    expect(flat(await extractPdfText(warm))).toContain('Αθηνά Παπαδοπούλου');
  });
});

describe('formatTokenAmount', () => {
  it.each([
    ['0', '0.00'],
    ['1234.5', '1,234.50'],
    ['1000000', '1,000,000.00'],
    ['0.000001', '0.000001'],
    ['12.10', '12.10'],
    ['999999999999999.999999', '999,999,999,999,999.999999'],
    ['123456789012345.123456789012345678', '123,456,789,012,345.123456789012345678'],
  ])('%s -> %s', (input, expected) => {
    expect(formatTokenAmount(input)).toBe(expected);
  });

  it('caps decimals at the token precision', () => {
    expect(formatTokenAmount('1.1234567', 6)).toBe('1.123457');
  });
});

describe('formatDocumentDate', () => {
  it('formats in the document time zone', () => {
    expect(formatDocumentDate('2026-11-21T23:30:00Z', 'UTC')).toBe('21 Nov 2026');
    expect(formatDocumentDate('2026-11-21T23:30:00Z', 'Asia/Tokyo')).toBe('22 Nov 2026');
    expect(formatDocumentDate('2026-11-21T03:30:00Z', 'America/Los_Angeles')).toBe('20 Nov 2026');
  });

  it('falls back to UTC for an unknown zone', () => {
    expect(formatDocumentDate('2026-09-05T12:00:00Z', 'Mars/Olympus')).toBe('5 Sep 2026');
  });
});
