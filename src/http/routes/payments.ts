// The account (its settlement address) and the on-chain payments the detector records
// (docs/payments.md): read them, list them, and attach an unmatched one to an invoice.
import { addressHeldByAnother, findAccountView, setSettlementAddress } from '../../db/accounts.js';
import { findInvoice } from '../../db/invoices.js';
import { findPayment, listPayments, paymentsOfInvoice } from '../../db/payments.js';
import { withTransaction } from '../../db/pool.js';
import { reservedAddressUse } from '../../domain/chains.js';
import { parseAddress } from '../../domain/payments.js';
import { ApiError, notFound } from '../../errors.js';
import { presentPayment } from '../../chain/payment-object.js';
import { coerceLimit, listBody, pageRequest } from '../pagination.js';
import { Account, ApplyPaymentBody, ListPaymentsQuery, Payment, PaymentIdParams, UpdateAccountBody, type AccountObject } from '../schemas/index.js';
import { errorResponses, refusalAsApiError } from '../route-helpers.js';
import { applyUnmatchedPayment } from '../../invoicing/apply-payment.js';
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
      const payment = await refusalAsApiError(applyUnmatchedPayment(pool, deps.config.chains, req.auth, req.params.paymentId, req.body.invoice_id));
      return { data: payment };
    },
  );
}
