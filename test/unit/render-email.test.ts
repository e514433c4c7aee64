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
    tokenDecimals: 6,
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

  it.each(EMAIL_KINDS.filter((k) => k !== 'receipt' && k !== 'partial_payment' && k !== 'payment_failed'))('%s: text body has amount, network, pay link and memo, unescaped', (kind) => {
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
      partialPayment: { amount: '1', remaining: '2', txHash: `0x${'ab'.repeat(32)}`, url: null },
      paymentFailure: { message: 'short', attempt: 1, nextAttemptAt: null, finalAction: 'cancel' },
    });
    for (const kind of EMAIL_KINDS) {
      const { subject } = renderEmail(kind, doc);
      expect(subject).not.toMatch(/[\r\n]/);
    }
    expect(renderEmail('invoice', doc).subject).toBe('Invoice INV-1 Bcc: victim@example.com from Acme X-Injected: yes');
  });

  it('shows the settlement address, the payment reference and the token beside the amount, with one line on how to pay', () => {
    const onChain = { to: '0x23618e81E3f5cdF7f54C3d65f7FBc0aBf5B21E8f', paymentReference: '0x1a2b3c4d5e6f7a8b', viaProxy: true };
    const doc = invoice({ tokenAddress: '0x036CbD53842c5426634e7929541eC2318f3dCF7e', onChain });
    const { html, text } = renderEmail('invoice', doc);
    expect(text).toContain(`Pay to: ${onChain.to}\nPayment reference: ${onChain.paymentReference}\nToken contract: 0x036CbD53842c5426634e7929541eC2318f3dCF7e\n`);
    expect(text).toContain('Pay through the fee proxy with this reference (a wallet on the payment page does it), or by plain transfer of exactly this amount to this address.');
    expect(html).toMatch(/Payment reference<\/td><td[^>]*>0x1a2b3c4d5e6f7a8b</);
    expect(html).toMatch(/Pay to<\/td><td[^>]*>0x23618e81E3f5cdF7f54C3d65f7FBc0aBf5B21E8f</);
    expect(html).toContain('Pay through the fee proxy with this reference');
    expect(renderEmail('reminder_after', doc).text).toContain(`Payment reference: ${onChain.paymentReference}`);
    // Without a settlement address (or on a receipt) there are no payment instructions.
    for (const body of [renderEmail('invoice', invoice()).text, renderEmail('receipt', doc).text, renderEmail('receipt', doc).html]) {
      expect(body).not.toContain('Payment reference');
      expect(body).not.toContain('fee proxy');
    }
  });

  it('a receipt names every payment that made up the total, each transaction linked to the explorer when the chain has one', () => {
    const txHash = `0x${'ab'.repeat(32)}`;
    const second = `0x${'cd'.repeat(32)}`;
    const url = `https://explorer.example.test/tx/${txHash}`;
    const linked = renderEmail('receipt', invoice({ payments: [{ amount: '500', txHash, url }, { amount: '735.5', txHash: second, url: `https://explorer.example.test/tx/${second}` }] }));
    expect(linked.text).toContain(`Transaction: ${url} (500.00 USDC)`);
    expect(linked.text).toContain(`Transaction: https://explorer.example.test/tx/${second} (735.50 USDC)`);
    expect(linked.html).toContain(`<a href="${url}" style="color:#1a4fd6;">${txHash}</a>`);
    expect(linked.html).toContain(`${second}</a> <span style="font-family:inherit;">(735.50 USDC)</span>`);
    const unlinked = renderEmail('receipt', invoice({ payments: [{ amount: '1234.5', txHash, url: null }] }));
    expect(unlinked.text).toContain(`Transaction: ${txHash} (1,234.50 USDC)`);
    expect(unlinked.html).toContain(txHash);
    expect(unlinked.html).not.toContain('explorer.example.test');
    expect(renderEmail('receipt', invoice()).text).not.toContain('Transaction');
    expect(() => renderEmail('receipt', invoice({ payments: [{ amount: '1', txHash, url: 'javascript:alert(1)' }] }))).toThrow(/http/);
  });

  it('a partial payment is acknowledged: what arrived, its transaction, what remains, the link to pay the rest; no attachment line', () => {
    const txHash = `0x${'ef'.repeat(32)}`;
    const { subject, text, html } = renderEmail('partial_payment', invoice({ paidAt: null, partialPayment: { amount: '500', remaining: '734.5', txHash, url: null } }));
    expect(subject).toMatch(/^Partial payment received: 500\.00 USDC toward invoice /);
    expect(text).toContain('Received: 500.00 USDC');
    expect(text).toContain(`Transaction: ${txHash}`);
    expect(text).toContain('Remaining to pay: 734.50 USDC');
    expect(text).toMatch(/Pay the rest: https?:\/\//);
    expect(html).toContain('>Pay the rest</a>');
    for (const body of [text, html]) expect(body).not.toContain('attached');
    expect(() => renderEmail('partial_payment', invoice())).toThrow(/needs the payment/);
  });

  it('a failed charge attempt: what failed and by how much, the attempt, the next one or the end, the link to pay; no attachment line', () => {
    const message = "Your wallet's balance is 6.50 USDC short of this period's 10.00 USDC.";
    const retry = renderEmail('payment_failed', invoice({ paidAt: null, paymentFailure: { message, attempt: 1, nextAttemptAt: '2026-03-02T09:00:00Z', finalAction: null } }));
    expect(retry.subject).toMatch(/^Payment failed: .* USDC for invoice /);
    expect(retry.text).toContain(`What failed: ${message}`);
    expect(retry.text).toContain('Attempt: 1');
    expect(retry.text).toMatch(/We will try again on .*2026/);
    expect(retry.text).toMatch(/Pay invoice: https?:\/\//);
    expect(retry.html).toContain('6.50 USDC short');
    for (const body of [retry.text, retry.html]) expect(body).not.toContain('attached');
    const last = renderEmail('payment_failed', invoice({ paidAt: null, paymentFailure: { message, attempt: 5, nextAttemptAt: null, finalAction: 'cancel' } }));
    expect(last.text).toContain('That was the last attempt: the subscription is canceled.');
    const kept = renderEmail('payment_failed', invoice({ paidAt: null, paymentFailure: { message, attempt: 5, nextAttemptAt: null, finalAction: 'keep' } }));
    expect(kept.text).toContain('That was the last attempt for this period.');
    expect(() => renderEmail('payment_failed', invoice())).toThrow(/needs the failure/);
  });

  it('says only what is true of paying on-chain: the fee proxy and the page\'s wallet only when the invoice has payment instructions', () => {
    const onChain = { to: '0x23618e81E3f5cdF7f54C3d65f7FBc0aBf5B21E8f', paymentReference: '0x1a2b3c4d5e6f7a8b' };
    const proxy = renderEmail('invoice', invoice({ onChain: { ...onChain, viaProxy: true } }));
    expect(proxy.text).toContain('Pay through the fee proxy with this reference');
    const plain = renderEmail('invoice', invoice({ onChain: { ...onChain, viaProxy: false } }));
    for (const body of [plain.text, plain.html]) {
      expect(body).not.toContain('fee proxy');
      expect(body).not.toContain('wallet on the payment page');
      expect(body).toContain('Pay by plain transfer of exactly this amount to this address.');
    }
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
