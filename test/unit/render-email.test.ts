import { describe, expect, it } from 'vitest';
import { EMAIL_KINDS, loadEmailTemplates, renderEmail } from '../../src/mail/render-email.js';
import type { InvoiceDocument } from '../../src/domain/invoice-document.js';

function invoice(overrides: Partial<InvoiceDocument> = {}): InvoiceDocument {
  return {
    invoiceId: '0b9d5e3c-1d2a-4c4e-9a53-2f0e7c1d8a11',
    code: 'INV-000042',
    reference: 'ref_8f3k2',
    merchant: { name: 'Acme & Sons', email: 'billing@acme.test' },
    customer: { name: 'Jane Doe', email: 'jane@example.com' },
    issuedAt: '2026-11-21T10:00:00.000Z',
    dueAt: '2026-12-01T23:30:00.000Z',
    timeZone: 'Asia/Tokyo',
    amount: '1234.5',
    currency: 'USDC',
    network: 'base-sepolia',
    chainId: 84532,
    lines: [{ description: 'Design work', quantity: 1, unitAmount: '1234.5', lineTotal: '1234.5' }],
    memo: 'Thanks!',
    footer: null,
    taxId: null,
    payUrl: 'https://pay.example.com/pay/ref_8f3k2?utm=a&x=1',
    paidAt: '2026-11-25T08:00:00.000Z',
    ...overrides,
  };
}

describe('renderEmail', () => {
  it('finds and compiles every template', () => {
    expect(() => loadEmailTemplates()).not.toThrow();
  });

  it('renders the subjects of the three kinds, dates in the document zone', () => {
    // 23:30 UTC on 1 Dec is 2 Dec in Tokyo.
    expect(renderEmail('invoice', invoice()).subject).toBe('Invoice INV-000042 from Acme & Sons');
    expect(renderEmail('reminder_before', invoice()).subject).toBe('Reminder: invoice INV-000042 is due on 2 Dec 2026');
    expect(renderEmail('reminder_after', invoice()).subject).toBe('Overdue: invoice INV-000042 was due on 2 Dec 2026');
  });

  it.each(EMAIL_KINDS.filter((k) => k !== 'receipt'))('%s: text body has amount, network, pay link and memo, unescaped', (kind) => {
    const { text } = renderEmail(kind, invoice());
    expect(text).toContain('1,234.50 USDC on base-sepolia');
    expect(text).toContain('Pay online: https://pay.example.com/pay/ref_8f3k2?utm=a&x=1');
    expect(text).toContain('Thanks!');
    expect(text).toContain('Acme & Sons');
    expect(text).not.toContain('&amp;');
  });

  it('invoice email carries code, merchant, amount, due date, memo and pay link', () => {
    const { html, text } = renderEmail('invoice', invoice());
    for (const body of [html, text]) {
      expect(body).toContain('INV-000042');
      expect(body).toContain('1,234.50 USDC on base-sepolia');
      expect(body).toContain('2 Dec 2026');
      expect(body).toContain('Thanks!');
    }
    expect(html).toContain('Acme &amp; Sons');
    expect(html).toMatch(/<a href="https:\/\/pay\.example\.com\/pay\/ref_8f3k2\?utm&#x3D;a&amp;x&#x3D;1"/);
  });

  it('keeps every significant decimal of a tiny amount', () => {
    const { text } = renderEmail('invoice', invoice({ amount: '0.000001' }));
    expect(text).toContain('Amount: 0.000001 USDC');
  });

  it('escapes user text in HTML: a <script> memo arrives as visible text', () => {
    const memo = '<script>alert(1)</script>';
    const { html, text } = renderEmail('invoice', invoice({ memo, merchant: { name: '<b>Evil</b> "Corp"', email: null } }));
    expect(html).not.toContain('<script>');
    expect(html).toContain('&lt;script&gt;alert(1)&lt;/script&gt;');
    expect(html).not.toContain('<b>Evil</b>');
    expect(html).toContain('&lt;b&gt;Evil&lt;/b&gt; &quot;Corp&quot;');
    // The text body is not HTML: it shows the memo as written.
    expect(text).toContain(memo);
  });

  it('omits the memo block when there is none', () => {
    const { html, text } = renderEmail('invoice', invoice({ memo: null }));
    expect(text).not.toContain('Memo');
    expect(html).not.toContain('Memo');
  });

  it('strips CR/LF from the subject (no header injection)', () => {
    const doc = invoice({
      code: 'INV-1\r\nBcc: victim@example.com',
      merchant: { name: 'Acme\nX-Injected: yes\r', email: null },
    });
    for (const kind of EMAIL_KINDS) {
      const { subject } = renderEmail(kind, doc);
      expect(subject).not.toMatch(/[\r\n]/);
    }
    expect(renderEmail('invoice', doc).subject).toBe('Invoice INV-1 Bcc: victim@example.com from Acme X-Injected: yes');
  });

  it('greets by email when the customer has no name', () => {
    const { text } = renderEmail('invoice', invoice({ customer: { name: null, email: 'anon@example.com' } }));
    expect(text).toMatch(/^Hello anon@example\.com,/);
  });

  it('refuses a reminder without a due date and a non-web pay link', () => {
    expect(() => renderEmail('reminder_before', invoice({ dueAt: null }))).toThrow(/due date/);
    expect(renderEmail('invoice', invoice({ dueAt: null })).text).not.toContain('Due:');
    expect(() => renderEmail('invoice', invoice({ payUrl: 'javascript:alert(1)' }))).toThrow(/http/);
  });
});
