// PDF rendering off the event loop: the thread pool renders the same bytes as the main thread,
// and while cap-size invoices render the process's event loop keeps answering.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_LINE_DESCRIPTION, MAX_LINE_ITEMS } from '../../src/domain/invoice-limits.js';
import type { InvoiceDocument } from '../../src/domain/invoice-document.js';
import { createPdfRenderPool, type PdfRenderPool } from '../../src/pdf/render-pool.js';
import { renderInvoicePdf } from '../../src/pdf/invoice-pdf.js';
import { renderReceiptPdf } from '../../src/pdf/receipt-pdf.js';

/** The largest invoice the API accepts: the line-item cap, each description at its cap. */
export function capSizeDocument(i = 0): InvoiceDocument {
  return {
    invoiceId: `inv_capsize${i}`,
    code: `INV-CAP-${i}`,
    reference: `ref${i}`,
    merchant: { name: 'Acme Widgets Ltd', email: 'billing@acme.test' },
    customer: { name: 'Jane Doe', email: 'jane@example.test' },
    issuedAt: '2026-03-01T10:00:00.000Z',
    dueAt: '2026-03-31T10:00:00.000Z',
    timeZone: 'Europe/Paris',
    amount: String(MAX_LINE_ITEMS * 3),
    currency: 'USDC',
    tokenDecimals: 6,
    network: 'base',
    chainId: 8453,
    lines: Array.from({ length: MAX_LINE_ITEMS }, (_, n) => ({
      description: `Line ${n} `.padEnd(MAX_LINE_DESCRIPTION, 'lorem ipsum dolor sit amet '),
      quantity: 3,
      unitAmount: '1',
      lineTotal: '3',
    })),
    memo: 'Thank you.',
    footer: 'Acme Widgets Ltd',
    taxId: null,
    payUrl: 'https://pay.example.test/ref',
  };
}

let pool: PdfRenderPool;
beforeAll(() => {
  pool = createPdfRenderPool(2);
});
afterAll(async () => {
  await pool?.close();
});

/** The longest the event loop went without running a 5 ms timer while `work` ran. */
async function longestStall(work: () => Promise<unknown>): Promise<number> {
  let last = performance.now();
  let longest = 0;
  const timer = setInterval(() => {
    const now = performance.now();
    longest = Math.max(longest, now - last);
    last = now;
  }, 5);
  try {
    await work();
  } finally {
    clearInterval(timer);
  }
  return Math.max(longest, performance.now() - last);
}

describe('the PDF render pool', () => {
  it('renders exactly the bytes the main thread renders', async () => {
    const doc = { ...capSizeDocument(1), lines: capSizeDocument(1).lines.slice(0, 5) };
    const [a, b] = await Promise.all([pool.render(doc), pool.render(doc)]);
    const main = await renderInvoicePdf(doc);
    expect(a.equals(main)).toBe(true);
    expect(b.equals(main)).toBe(true);
    expect(main.subarray(0, 5).toString()).toBe('%PDF-');
  }, 60_000);

  it('renders receipts too, the same bytes as the main thread; a receipt without paidAt is refused as there', async () => {
    const doc = { ...capSizeDocument(3), lines: capSizeDocument(3).lines.slice(0, 5), paidAt: '2026-03-05T12:00:00.000Z' };
    const main = await renderReceiptPdf(doc);
    expect((await pool.render(doc, 'receipt')).equals(main)).toBe(true);
    expect((await pool.render(doc)).equals(await renderInvoicePdf(doc))).toBe(true);
    expect(main.equals(await renderInvoicePdf(doc))).toBe(false);
    await expect(pool.render({ ...doc, paidAt: null }, 'receipt')).rejects.toThrow(/paidAt/);
  }, 60_000);

  it('keeps the event loop free while cap-size invoices render', async () => {
    const doc = capSizeDocument(2);
    await pool.render(doc); // threads started, fonts parsed
    // What one such render costs the event loop on the main thread...
    const mainStall = await longestStall(() => renderInvoicePdf(doc));
    // ...and what four of them cost it in the pool.
    const poolStall = await longestStall(() => Promise.all([0, 1, 2, 3].map((i) => pool.render(capSizeDocument(10 + i)))));
    console.info(`longest event-loop stall: ${mainStall.toFixed(0)} ms for one render on the main thread, ${poolStall.toFixed(0)} ms for four in the pool`);
    expect(mainStall).toBeGreaterThan(50);
    expect(poolStall).toBeLessThan(mainStall / 2);
  }, 120_000);
});
