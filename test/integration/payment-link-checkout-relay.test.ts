// Issue 24, finding 8: anonymous checkouts were an email relay (100 POST /pay/<link>/checkout naming
// 100 strangers, no Origin header: 100 invoice emails). On a real chain fixture (anvil, the API
// listening, a worker, an SMTP sink): a checkout emails nobody, needs its page's origin, is bounded
// per link and per email, and an unpaid one is voided once expired. Absence of email is asserted
// only after a positive signal: the outbox handed over, the send queue drained, and a control
// email sent afterwards arrived.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestChain } from '../helpers/anvil.js';
import { startChainFixture, type ChainFixture } from '../helpers/chain-fixture.js';
import type { ApiFixture } from '../helpers/context.js';
import { apiClient, type JsonBody } from '../helpers/http.js';
import { recipientsOf, type SmtpSink } from '../helpers/smtp-sink.js';
import { MULTI_STATE_TEST_TIMEOUT_MS, waitQueueDrained, waitUntil } from '../helpers/worker.js';

const MERCHANT = '0x5555555555555555555555555555555555555555';
const STATE_TIMEOUT_MS = 30_000;
/** The defaults of CHECKOUT_LIMIT_PER_LINK and CHECKOUT_LIMIT_PER_EMAIL. */
const PER_LINK = 10;
const PER_EMAIL = 3;

describe('payment link checkouts are no email relay', { timeout: MULTI_STATE_TEST_TIMEOUT_MS }, () => {
  let chain: TestChain;
  let fx: ApiFixture;
  let sink: SmtpSink;
  let origin: string;
  const api = apiClient(() => fx.api.app);
  const key = () => fx.merchant.keys.sandbox;
  let fixture: ChainFixture | undefined;
  beforeAll(async () => {
    // The expiry job every second, so a checkout made expired is voided within one.
    fixture = await startChainFixture({ settlementAddress: MERCHANT, listen: true, env: { CHECKOUT_EXPIRE_EVERY: 'PT1S' } });
    ({ chain, fx, sink } = fixture);
    origin = fixture.origin!;
  }, 120_000);
  afterAll(async () => {
    await fixture?.close();
  });

  async function customLink(): Promise<JsonBody> {
    const res = await api.post('/v1/payment-links', key(), { name: 'Donation', type: 'custom_amount', currency: 'USDC', network: 'local', min_amount: '1', max_amount: '50' });
    expect(res.status, res.raw).toBe(200);
    return res.body.data;
  }

  async function checkout(linkId: string, email: string, headers: Record<string, string>): Promise<{ status: number; body: JsonBody }> {
    const res = await fetch(`${origin}/pay/${linkId}/checkout`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json', ...headers },
      body: JSON.stringify({ amount: '5', customer_email: email }),
    });
    return { status: res.status, body: (await res.json()) as JsonBody };
  }
  const sameOrigin = () => ({ origin, 'sec-fetch-site': 'same-origin' });
  const strangers = (tag: string, n: number) => Array.from({ length: n }, (_, i) => `stranger-${tag}-${i}@example.test`);

  async function invoicesOfLink(linkId: string): Promise<{ id: string; status: string; email: string; expires: Date | null; created: Date; metadata: Record<string, string> }[]> {
    const { rows } = await fx.api.pool.query(
      `select i.id, i.status, c.email, i.checkout_expires_at as expires, i.created_at as created, i.metadata
       from invoices i join customers c on c.id = i.customer_id where i.payment_link_id = $1 order by i.created_at`,
      [linkId],
    );
    return rows;
  }

  /** Everything owed so far has been handed over and sent, and a control email sent after it arrived. */
  async function mailSettled(): Promise<void> {
    await waitUntil(async () => (await fx.api.pool.query(`select 1 from outbox where enqueued_at is null`)).rowCount === 0, STATE_TIMEOUT_MS);
    await waitQueueDrained(fx.api.queues.send, STATE_TIMEOUT_MS);
    const control = `control-${Date.now()}@example.test`;
    const created = await api.post('/v1/invoices', key(), { customer_email: control, amount: '1', network: 'local', currency: 'USDC' });
    expect(created.status, created.raw).toBe(200);
    expect((await api.post(`/v1/invoices/${created.body.data.id}/send`, key())).status).toBe(200);
    await waitUntil(async () => sink.messages.some((m) => recipientsOf(m).includes(control)), STATE_TIMEOUT_MS);
    await waitQueueDrained(fx.api.queues.send, STATE_TIMEOUT_MS);
  }

  it('100 checkouts naming 100 strangers without an Origin header: all refused, nothing made, no email', async () => {
    const link = await customLink();
    const emails = strangers('anon', 100);
    for (const email of emails) {
      const res = await checkout(link.id, email, {});
      expect(res.status, JSON.stringify(res.body)).toBe(403);
      expect(res.body.error.code).toBe('permission_denied');
    }
    expect(await invoicesOfLink(link.id)).toEqual([]);
    await mailSettled();
    expect(sink.recipientsSeen.filter((a) => emails.includes(a))).toEqual([]);
  });

  it('100 checkouts naming 100 strangers with forged same-origin headers: at most CHECKOUT_LIMIT_PER_LINK made, none emailed', async () => {
    const link = await customLink();
    const emails = strangers('forged', 100);
    const statuses: number[] = [];
    for (const email of emails) {
      const res = await checkout(link.id, email, sameOrigin());
      statuses.push(res.status);
      if (res.status !== 200) expect(res.body.error.code).toBe('checkout_limit_reached');
    }
    expect(statuses.filter((s) => s === 200)).toHaveLength(PER_LINK);
    expect(statuses.filter((s) => s === 429)).toHaveLength(100 - PER_LINK);
    const made = await invoicesOfLink(link.id);
    expect(made).toHaveLength(PER_LINK);
    for (const inv of made) {
      // Open, marked as a checkout, and expiring a day (CHECKOUT_EXPIRY) after it was made.
      expect(inv.status).toBe('open');
      expect(inv.metadata).toEqual({ payment_link_id: link.id, source: 'checkout' });
      expect(Math.abs(inv.expires!.getTime() - inv.created.getTime() - 86_400_000)).toBeLessThan(60_000);
    }
    // No email is owed for any of them, and after everything owed went out none reached a stranger.
    const { rows } = await fx.api.pool.query(`select count(*)::int as n from deliveries where invoice_id = any($1::text[])`, [made.map((m) => m.id)]);
    expect(rows[0].n).toBe(0);
    await mailSettled();
    expect(sink.recipientsSeen.filter((a) => emails.includes(a))).toEqual([]);
  });

  it('one email address gets at most CHECKOUT_LIMIT_PER_EMAIL unpaid checkouts across the account\'s links', async () => {
    const victim = 'victim@example.test';
    const links = await Promise.all(Array.from({ length: PER_EMAIL + 2 }, () => customLink()));
    const statuses: number[] = [];
    for (const link of links) statuses.push((await checkout(link.id, victim, sameOrigin())).status);
    expect(statuses).toEqual([...Array(PER_EMAIL).fill(200), 429, 429]);
    // Case does not make another address.
    const upper = await checkout(links[0].id, victim.toUpperCase(), sameOrigin());
    expect(upper.status).toBe(429);
    expect(upper.body.error).toMatchObject({ code: 'checkout_limit_reached' });
    expect(upper.body.error.message).toContain('email');
  });

  it('the wallet\'s checkout is paid and the receipt goes to the typed email; an expired unpaid checkout is voided, one with a payment is kept', async () => {
    const link = await customLink();
    const paying = await checkout(link.id, 'payer@example.test', sameOrigin());
    const partial = await checkout(link.id, 'partial@example.test', sameOrigin());
    const abandoned = await checkout(link.id, 'abandoned@example.test', sameOrigin());
    for (const c of [paying, partial, abandoned]) expect(c.status, JSON.stringify(c.body)).toBe(200);
    // Paid in full: paid, and its receipt (the only email) reaches the typed address.
    const pi = paying.body.instructions;
    await chain.payWithReference({ to: pi.to, amountAtomic: BigInt(pi.amount_atomic), feeAtomic: BigInt(pi.fee_atomic), reference: pi.payment_reference, feeAddress: pi.fee_address });
    // Partly paid: 1 USDC of 5, to the merchant.
    const pp = partial.body.instructions;
    await chain.payWithReference({ to: pp.to, amountAtomic: 1_000_000n, feeAtomic: 0n, reference: pp.payment_reference, feeAddress: pp.fee_address });
    await chain.mine(2);
    const statusOf = async (reference: string) => (await (await fetch(`${origin}/pay/${reference}/status`)).json()) as JsonBody;
    await waitUntil(async () => (await statusOf(paying.body.reference)).status === 'paid', STATE_TIMEOUT_MS);
    await waitUntil(async () => (await statusOf(partial.body.reference)).amount_paid_atomic !== '0', STATE_TIMEOUT_MS);
    await waitUntil(async () => sink.messages.some((m) => recipientsOf(m).includes('payer@example.test') && (m.subject ?? '').startsWith('Payment received')), STATE_TIMEOUT_MS);
    // Both unpaid ones reach their expiry: the one nobody paid is voided, the one with a payment stays.
    await fx.api.pool.query(`update invoices set checkout_expires_at = now() - interval '1 second' where payment_link_id = $1 and status = 'open'`, [link.id]);
    await waitUntil(async () => (await statusOf(abandoned.body.reference)).status === 'void', STATE_TIMEOUT_MS);
    expect((await statusOf(partial.body.reference)).status).toBe('open');
    expect((await statusOf(paying.body.reference)).status).toBe('paid');
    await mailSettled();
    // The payer got the receipt only (no invoice email); the others got nothing.
    expect(sink.recipientsSeen.filter((a) => a === 'payer@example.test')).toHaveLength(1);
    expect(sink.recipientsSeen.filter((a) => a === 'abandoned@example.test')).toEqual([]);
  });
});
