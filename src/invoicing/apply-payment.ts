// A merchant's application of a payment the detector could not match (POST /v1/payments/{id}/apply):
// it counts toward the invoice by the one rule the detector applies with (applyPaymentTo), and the
// invoice's balance is written by the same statement (writeInvoiceBalances).
import { emitEvent } from '../db/events.js';
import { attachPayment, emitPartiallyPaid, findPayment, lockPayableInvoice, writeInvoiceBalances } from '../db/payments.js';
import { withTransaction, type Pool } from '../db/pool.js';
import type { Scope } from '../db/scope.js';
import type { ChainRegistry } from '../domain/chains.js';
import { applyPaymentTo, dustFloorAtomic, sameAddress } from '../domain/payments.js';
import { DomainError, missing } from '../errors.js';
import { kindNamed } from '../chain/kinds/index.js';
import { presentPayment, type PaymentObject } from '../chain/payment-object.js';

/** The payment as it counts now; refuses a pending or removed payment, one already counted, another chain's or token's invoice, or an invoice that takes none. */
export async function applyUnmatchedPayment(pool: Pool, chains: ChainRegistry, scope: Scope, paymentId: string, invoiceId: string): Promise<PaymentObject> {
  return withTransaction(pool, async (tx) => {
    const p = await findPayment(tx, scope, paymentId, true);
    if (!p) throw missing('payment', paymentId);
    if (p.status !== 'confirmed') {
      throw new DomainError('payment_not_confirmed', `This payment is ${p.status}; only a confirmed payment can be applied.`);
    }
    // A payment that counted toward an invoice stays with it; one that changed nothing (no
    // invoice, or recorded against a void or already paid one) may go to the invoice it pays.
    if (p.outcome === 'applied') {
      throw new DomainError('payment_already_applied', `This payment already counts toward invoice ${p.invoice_id}.`);
    }
    const inv = await lockPayableInvoice(tx, scope, invoiceId);
    if (!inv) throw missing('invoice', invoiceId);
    if (inv.chain_id !== p.chain_id || !sameAddress(inv.token_address, p.token_address)) {
      throw new DomainError('payment_invoice_mismatch', `This payment is in another token or on another chain than invoice ${inv.id}.`, 'invoice_id');
    }
    const receipt = { receivedAtomic: BigInt(p.received_atomic), feeReceivedAtomic: BigInt(p.fee_received_atomic) };
    const application = applyPaymentTo(
      {
        status: inv.status,
        amountAtomic: BigInt(inv.amount_atomic),
        paidAtomic: BigInt(inv.amount_paid_atomic),
        feeAtomic: BigInt(inv.fee_atomic ?? '0'),
        feeCountedAtomic: BigInt(inv.fee_counted_atomic),
      },
      receipt,
      { blockTime: p.block_time ?? new Date(), dustFloorAtomic: dustFloorAtomic(inv.token_decimals) },
    );
    if (application.outcome !== 'applied') {
      throw new DomainError('payment_invoice_mismatch', `Invoice ${inv.id} is ${inv.status}: it takes no payment.`, 'invoice_id');
    }
    const feeExpected = kindNamed(p.kind).expectedFeeAtomic(receipt.receivedAtomic + receipt.feeReceivedAtomic, inv.fee_bps ?? 0);
    await attachPayment(tx, p.id, inv.id, 'applied', feeExpected?.toString() ?? null, application.countedAtomic.toString());
    await writeInvoiceBalances(tx, [
      {
        id: inv.id,
        amount_paid_atomic: application.ledger.paidAtomic.toString(),
        fee_counted_atomic: application.ledger.feeCountedAtomic.toString(),
        status: application.ledger.status,
        paid_at: application.paidAt?.toISOString() ?? null,
      },
    ]);
    if (application.announcesPartial) await emitPartiallyPaid(tx, [inv.id]);
    const applied = presentPayment((await findPayment(tx, scope, p.id))!, chains);
    await emitEvent(tx, scope, 'payment.applied', 'payment', p.id, applied);
    return applied;
  });
}
