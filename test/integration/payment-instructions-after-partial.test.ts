// Paying exactly what the payment instructions say after a partial payment pays the invoice (found
// by an adversarial review). They asked for the fee of what remains by the rule, rounded half up,
// whatever of the invoice's fee was counted already: when the partial's own fee had been rounded
// up too, the two came to one unit more than the invoice's fee, the fee room capped what the last
// payment counted, and the invoice stayed open owing 1 atomic unit (no receipt, reminders on).
// The instructions now ask for no more of the fee than is left (invoices.fee_counted_atomic).
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestChain } from '../helpers/anvil.js';
import { startChainFixture, sendLocalInvoice, type ChainFixture } from '../helpers/chain-fixture.js';
import type { ApiFixture } from '../helpers/context.js';
import { apiClient, type JsonBody } from '../helpers/http.js';
import { recipientsOf, type SmtpSink } from '../helpers/smtp-sink.js';
import { waitUntil } from '../helpers/worker.js';

let chain: TestChain;
let fx: ApiFixture;
let sink: SmtpSink;
const api = apiClient(() => fx.api.app);
const key = () => fx.merchant.keys.sandbox;
const merchant = privateKeyToAccount(generatePrivateKey()).address;

let fixture: ChainFixture | undefined;
beforeAll(async () => {
  fixture = await startChainFixture({ settlementAddress: merchant.toLowerCase() });
  ({ chain, fx, sink } = fixture);
}, 120_000);
afterAll(async () => {
  await fixture?.close();
});

const invoice = async (id: string): Promise<JsonBody> => (await api.get(`/v1/invoices/${id}`, key())).body.data;

async function payByProxy(inv: JsonBody, opts: { total?: bigint } = {}) {
  const pi = inv.payment_instructions;
  const total = opts.total ?? BigInt(pi.total_atomic);
  // The fee by the account's rule (50 bps, half up), as `npm run pay -- <ref> <amount>` splits it.
  const fee = opts.total === undefined ? BigInt(pi.fee_atomic) : (total * 50n + 5_000n) / 10_000n;
  return chain.payWithReference({ to: pi.to, amountAtomic: total - fee, feeAtomic: fee, reference: pi.payment_reference, feeAddress: pi.fee_address });
}

describe('paying what the instructions say after a partial payment', () => {
  it('turns the invoice paid (the partial and the rest each split by the rule)', async () => {
    const email = `fee-${Math.random().toString(36).slice(2)}@example.test`;
    const inv = await sendLocalInvoice(api, key(), '30.00', email);
    expect(inv.payment_instructions).toMatchObject({ total_atomic: '30000000', fee_atomic: '150000' });
    // 10.0001 USDC, its fee by the rule: 50,000.5 -> 50,001.
    await payByProxy(inv, { total: 10_000_100n });
    await chain.mine(2);
    await waitUntil(async () => (await invoice(inv.id)).amount_paid_atomic === '10000100', 20_000);
    const partly = await invoice(inv.id);
    // What remains, 19,999,900: fee 99,999.5 -> 100,000 by the rule, but 99,999 is all that is left of the invoice's fee.
    expect(partly.payment_instructions).toMatchObject({ total_atomic: '19999900', fee_atomic: '99999', amount_atomic: '19899901' });
    expect(partly.amount_remaining_atomic).toBe('19999900');
    // The invoice.partially_paid event carries the same instructions (its snapshot has the fee counted).
    const events = await api.get('/v1/events?type=invoice.partially_paid&limit=100', key());
    const partial = (events.body.data as JsonBody[]).find((e) => e.data.object.id === inv.id);
    expect(partial?.data.object.payment_instructions).toMatchObject({ fee_atomic: '99999', amount_atomic: '19899901' });

    await payByProxy(partly);
    await chain.mine(2);
    await waitUntil(async () => {
      const { rows } = await fx.api.pool.query(`select count(*)::int as n from payments where invoice_id = $1 and status = 'confirmed'`, [inv.id]);
      return rows[0].n === 2;
    }, 20_000);
    const after = await invoice(inv.id);
    // 30,000,000 atomic moved as told: 29,850,000 to the merchant, 150,000 to the fee address.
    expect({ status: after.status, paid: after.amount_paid_atomic, remaining: after.amount_remaining_atomic }).toEqual({ status: 'paid', paid: '30000000', remaining: '0' });
    const { rows } = await fx.api.pool.query<{ fee: string }>('select fee_counted_atomic::text as fee from invoices where id = $1', [inv.id]);
    expect(rows[0].fee).toBe('150000');
    await waitUntil(async () => sink.messages.some((m) => recipientsOf(m).includes(email) && /^Payment received/.test(m.subject ?? '')), 20_000);
  }, 90_000);
});
