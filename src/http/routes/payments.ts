// The account (its settlement address) and the on-chain payments the detector records
// (docs/payments.md): read them, list them, and attach an unmatched one to an invoice.
import { addressHeldByAnother, findAccountView, setSettlementAddress } from '../../db/accounts.js';
import { emitEvent } from '../../db/events.js';
import { findInvoice } from '../../db/invoices.js';
import { attachPayment, emitPartiallyPaid, findPayment, listPayments, lockPayableInvoice, paymentsOfInvoice, writeInvoiceBalances } from '../../db/payments.js';
import { withTransaction } from '../../db/pool.js';
import { reservedAddressUse } from '../../domain/chains.js';
import { applyPayment, countedAtomic, expectedFeeAtomic, feeRoomAtomic, parseAddress, sameAddress } from '../../domain/payments.js';
import { ApiError, notFound } from '../../errors.js';
import { presentPayment } from '../../chain/payment-object.js';
import { requireWrite } from '../auth.js';
import { coerceLimit, listBody, pageRequest } from '../pagination.js';
import { Account, ApplyPaymentBody, ListPaymentsQuery, Payment, PaymentIdParams, UpdateAccountBody, type AccountObject } from '../schemas/index.js';
import { errorResponses } from '../route-helpers.js';
import { Data, ErrorEnvelope, InvoiceIdParams, ListOf } from '../schemas/index.js';
import type { Api, AppDeps } from '../types.js';
import type { AuthContext } from '../auth.js';

export async function paymentRoutes(app: Api, deps: AppDeps): Promise<void> {
  const { pool } = deps;

  async function account(auth: AuthContext): Promise<AccountObject> {
    const a = await findAccountView(pool, auth);
    if (!a) throw notFound('account', auth.accountId);
    return {
      id: a.id,
      object: 'account',
      name: a.name,
      email: a.email,
      environment: auth.environment,
      time_zone: a.time_zone,
      platform_fee_bps: a.platform_fee_bps,
      settlement_address: a.settlement_address,
    };
  }

  app.get(
    '/account',
    { schema: { tags: ['account'], summary: 'The account of the calling key, with its settlement address in the key\'s environment', response: { 200: Data(Account), ...errorResponses } } },
    async (req) => ({ data: await account(req.auth) }),
  );

  app.patch(
    '/account',
    {
      schema: {
        tags: ['account'],
        summary: 'Set the settlement address of the key\'s environment: invoices sent from now on are paid to it',
        body: UpdateAccountBody,
        response: { 200: Data(Account), ...errorResponses, 409: ErrorEnvelope },
      },
    },
    async (req) => {
      requireWrite(req.auth);
      const parsed = parseAddress(req.body.settlement_address, 'settlement_address');
      if (!parsed.ok) throw new ApiError('validation_failed', parsed.message, 'settlement_address');
      // The platform's own addresses are no tenant's: a fee address claimed would show every
      // tenant's fee payments as the claimant's unmatched payments.
      const reserved = reservedAddressUse(deps.config.chains, parsed.address);
      if (reserved) {
        throw new ApiError(
          'settlement_address_reserved',
          `settlement_address is the platform's ${reserved.role === 'token contract' ? `${reserved.currency} token contract` : reserved.role} on ${reserved.network} (chain ${reserved.chainId}); use an address of your own.`,
          'settlement_address',
        );
      }
      await withTransaction(pool, async (tx) => {
        // A payment to an address is its one account's: two tenants never share one.
        if (await addressHeldByAnother(tx, req.auth, parsed.address)) {
          throw new ApiError('settlement_address_taken', 'This address is the settlement address of another account; use an address of your own.', 'settlement_address');
        }
        await setSettlementAddress(tx, req.auth, parsed.address);
      });
      return { data: await account(req.auth) };
    },
  );

  app.get(
    '/invoices/:invoiceId/payments',
    {
      schema: {
        tags: ['payments'],
        summary: 'The on-chain payments of an invoice, oldest first (pending, confirmed and removed)',
        params: InvoiceIdParams,
        response: { 200: ListOf(Payment), ...errorResponses },
      },
    },
    async (req) => {
      const inv = await findInvoice(pool, req.auth, req.params.invoiceId);
      if (!inv) throw notFound('invoice', req.params.invoiceId);
      return { data: (await paymentsOfInvoice(pool, inv.id)).map((p) => presentPayment(p, deps.config.chains)), has_more: false };
    },
  );

  app.get(
    '/payments',
    {
      preValidation: coerceLimit,
      schema: {
        tags: ['payments'],
        summary: 'List the on-chain payments of the key\'s environment, newest first',
        querystring: ListPaymentsQuery,
        response: { 200: ListOf(Payment), ...errorResponses },
      },
    },
    async (req) => {
      const q = req.query;
      const page = await listPayments(
        pool,
        req.auth,
        { unmatched: q.unmatched === undefined ? undefined : q.unmatched === 'true', invoiceId: q.invoice_id, status: q.status },
        pageRequest(q),
      );
      return listBody(page, 'payment', (p) => presentPayment(p, deps.config.chains));
    },
  );

  app.get(
    '/payments/:paymentId',
    { schema: { tags: ['payments'], summary: 'Retrieve an on-chain payment', params: PaymentIdParams, response: { 200: Data(Payment), ...errorResponses } } },
    async (req) => {
      const p = await findPayment(pool, req.auth, req.params.paymentId);
      if (!p) throw notFound('payment', req.params.paymentId);
      return { data: presentPayment(p, deps.config.chains) };
    },
  );

  app.post(
    '/payments/:paymentId/apply',
    {
      schema: {
        tags: ['payments'],
        summary: 'Attach an unmatched confirmed payment to an open invoice of the same chain and token: it counts toward it as if matched',
        params: PaymentIdParams,
        body: ApplyPaymentBody,
        response: { 200: Data(Payment), ...errorResponses, 409: ErrorEnvelope },
      },
    },
    async (req) => {
      requireWrite(req.auth);
      const payment = await withTransaction(pool, async (tx) => {
        const p = await findPayment(tx, req.auth, req.params.paymentId, true);
        if (!p) throw notFound('payment', req.params.paymentId);
        if (p.status !== 'confirmed') {
          throw new ApiError('payment_not_confirmed', `This payment is ${p.status}; only a confirmed payment can be applied.`);
        }
        // A payment that counted toward an invoice stays with it; one that changed nothing (no
        // invoice, or recorded against a void or already paid one) may go to the invoice it pays.
        if (p.outcome === 'applied') {
          throw new ApiError('payment_already_applied', `This payment already counts toward invoice ${p.invoice_id}.`);
        }
        const inv = await lockPayableInvoice(tx, req.auth, req.body.invoice_id);
        if (!inv) throw notFound('invoice', req.body.invoice_id);
        if (inv.chain_id !== p.chain_id || !sameAddress(inv.token_address, p.token_address)) {
          throw new ApiError('payment_invoice_mismatch', `This payment is in another token or on another chain than invoice ${inv.id}.`, 'invoice_id');
        }
        // What reached the merchant, and the fee that reached the fee address up to what of this invoice's fee is not counted yet.
        const { countedAtomic: counted } = countedAtomic(
          { receivedAtomic: BigInt(p.received_atomic), feeReceivedAtomic: BigInt(p.fee_received_atomic) },
          feeRoomAtomic(BigInt(inv.fee_atomic ?? '0'), BigInt(inv.fee_counted_atomic)),
        );
        const application = applyPayment({ status: inv.status, amountAtomic: BigInt(inv.amount_atomic), paidAtomic: BigInt(inv.amount_paid_atomic) }, counted);
        if (application.outcome !== 'applied') {
          throw new ApiError('payment_invoice_mismatch', `Invoice ${inv.id} is ${inv.status}: it takes no payment.`, 'invoice_id');
        }
        const feeExpected =
          p.kind === 'proxy' ? expectedFeeAtomic('proxy', BigInt(p.received_atomic) + BigInt(p.fee_received_atomic), inv.fee_bps ?? 0).toString() : null;
        await attachPayment(tx, p.id, inv.id, 'applied', feeExpected, counted.toString());
        await writeInvoiceBalances(tx, [
          {
            id: inv.id,
            amount_paid_atomic: application.paidAtomic.toString(),
            status: application.status,
            paid_at: application.fullyPaid ? (p.block_time ?? new Date()).toISOString() : null,
          },
        ]);
        if (!application.fullyPaid) await emitPartiallyPaid(tx, [inv.id]);
        const applied = presentPayment((await findPayment(tx, req.auth, p.id))!, deps.config.chains);
        await emitEvent(tx, req.auth, 'payment.applied', 'payment', p.id, applied);
        return applied;
      });
      return { data: payment };
    },
  );
}
