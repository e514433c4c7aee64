// Sandbox-only helpers that do what the on-chain payment detector would: pay an invoice, take a
// payment on a link, start a subscription. A live key gets 403.
import { randomBytes } from 'node:crypto';
import { Type } from 'typebox';
import { upsertCustomer } from '../../db/customers.js';
import { emitEvent } from '../../db/events.js';
import { findInvoice, markPaid } from '../../db/invoices.js';
import { countPayments, findLink, insertLinkPayment } from '../../db/payment-links.js';
import { withTransaction } from '../../db/pool.js';
import { findPriceForUse } from '../../db/products.js';
import { insertSubscription } from '../../db/subscriptions.js';
import { newId } from '../../domain/ids.js';
import { nextStatus } from '../../domain/invoice-rules.js';
import { formatDecimal, Money, parseAmount, toAtomic } from '../../domain/money.js';
import { resolveToken } from '../../domain/tokens.js';
import { ApiError, notFound } from '../../errors.js';
import type { AppDeps } from '../types.js';
import { requireWrite, type AuthContext } from '../auth.js';
import { presentInvoice, presentLinkPayment, presentSubscription } from '../presenters.js';
import { Data, ErrorEnvelope, PaymentLinkIdParams, Invoice, InvoiceIdParams, LinkPayment, LinkPaymentBody, StartSubscriptionBody, Subscription } from '../schemas.js';
import type { Api } from '../types.js';
import { errorResponses, unwrap } from '../route-helpers.js';

function requireSandbox(auth: AuthContext): void {
  if (auth.environment !== 'sandbox') {
    throw new ApiError('live_mode_forbidden', 'Test helpers exist in the sandbox only; use a sandbox key.');
  }
  requireWrite(auth);
}

const fakeTxHash = () => `0x${randomBytes(32).toString('hex')}`;

export async function testHelperRoutes(app: Api, deps: AppDeps): Promise<void> {
  const { pool } = deps;
  const opts = { tags: ['test helpers'] };

  app.post(
    '/test_helpers/invoices/:invoiceId/pay',
    { schema: { ...opts, summary: 'Mark an open or overdue sandbox invoice paid', params: InvoiceIdParams, response: { 200: Data(Invoice), ...errorResponses } } },
    async (req) => {
      requireSandbox(req.auth);
      const paid = await markPaid(pool, req.auth, req.params.invoiceId);
      if (!paid) {
        const inv = await findInvoice(pool, req.auth, req.params.invoiceId);
        if (!inv) throw notFound('invoice', req.params.invoiceId);
        unwrap(nextStatus(inv.status, 'pay'));
        throw new ApiError('invoice_not_payable', 'This invoice cannot be paid now.');
      }
      if (deps.reminders) {
        try {
          await deps.reminders.stop(paid.id);
        } catch (err) {
          req.log.warn({ err, invoice_id: paid.id }, 'could not remove reminder schedules now; the paid re-check still stops every email');
        }
      }
      return { data: presentInvoice(paid) };
    },
  );

  app.post(
    '/test_helpers/payment-links/:paymentLinkId/payments',
    {
      schema: {
        ...opts,
        summary: 'Record a payment on an active sandbox payment link',
        params: PaymentLinkIdParams,
        // No body at all is fine (a preset or fixed amount): Fastify validates a missing body as null.
        body: Type.Union([LinkPaymentBody, Type.Null()]),
        response: { 200: Data(LinkPayment), ...errorResponses },
      },
    },
    async (req) => {
      requireSandbox(req.auth);
      const body = req.body ?? {};
      const payment = await withTransaction(pool, async (tx) => {
        // The row lock serialises payments on one link, so max_payments holds under concurrency.
        const link = await findLink(tx, req.auth, req.params.paymentLinkId, true);
        if (!link) throw notFound('payment link', req.params.paymentLinkId);
        if (link.status !== 'active') throw new ApiError('payment_link_inactive', 'This payment link is inactive and takes no payments.');
        if (link.max_payments !== null && (await countPayments(tx, link.id)) >= link.max_payments) {
          throw new ApiError('payment_link_exhausted', `This payment link already took its ${link.max_payments} payments.`);
        }
        let amount: string;
        if (link.type === 'fixed_price') {
          const price = await findPriceForUse(tx, req.auth, link.price_id!);
          amount = price!.amount;
          if (body.amount !== undefined) {
            const given = parseAmount(body.amount, link.token_decimals);
            if (!given.ok) throw new ApiError(given.code, given.message, 'amount');
            if (!given.value.equals(new Money(amount))) {
              throw new ApiError('amount_mismatch', `This link charges its price, ${amount} ${link.currency}.`, 'amount');
            }
          }
        } else {
          const raw = body.amount ?? link.preset_amount;
          if (raw === null) throw new ApiError('validation_failed', 'amount is required for a custom_amount link without a preset_amount.', 'amount');
          const given = parseAmount(raw, link.token_decimals);
          if (!given.ok) throw new ApiError(given.code, given.message, 'amount');
          if ((link.min_amount && given.value.lt(link.min_amount)) || (link.max_amount && given.value.gt(link.max_amount))) {
            throw new ApiError('amount_out_of_range', `amount must be between ${link.min_amount ?? '0'} and ${link.max_amount ?? 'any'} ${link.currency}.`, 'amount');
          }
          amount = formatDecimal(given.value);
        }
        return insertLinkPayment(tx, {
          id: newId('pay'),
          linkId: link.id,
          amount,
          amountAtomic: toAtomic(new Money(amount), link.token_decimals),
          customerEmail: body.customer_email ?? null,
          txHash: fakeTxHash(),
        });
      });
      return { data: presentLinkPayment(payment) };
    },
  );

  app.post(
    '/test_helpers/subscriptions',
    {
      schema: {
        ...opts,
        summary: 'Start a subscription on a recurring price (refused when the product is inactive)',
        body: StartSubscriptionBody,
        response: { 200: Data(Subscription), ...errorResponses, 409: ErrorEnvelope },
      },
    },
    async (req) => {
      requireSandbox(req.auth);
      const sub = await withTransaction(pool, async (tx) => {
        // findPriceForUse takes a share lock on the product: it cannot turn inactive until this
        // subscription is committed, and a product that did is refused here.
        const price = await findPriceForUse(tx, req.auth, req.body.price_id);
        if (!price) throw new ApiError('price_not_found', `No such price: ${JSON.stringify(req.body.price_id)}.`, 'price_id');
        if (!price.product_active) throw new ApiError('product_inactive', 'The product of this price is inactive; no new subscriptions can start on it.', 'price_id');
        if (!price.active) throw new ApiError('price_inactive', 'This price is inactive.', 'price_id');
        if (price.interval_seconds === null) throw new ApiError('price_not_recurring', 'This price is one_time; a subscription needs a recurring price.', 'price_id');
        const token = resolveToken(req.auth.environment, price.network, price.currency);
        if (!token.ok) throw new ApiError(token.code, token.message);
        const customer = await upsertCustomer(tx, req.auth, req.body.customer_email, null, null);
        const created = await insertSubscription(tx, req.auth, {
          id: newId('sub'),
          customerId: customer.id,
          priceId: price.id,
          amount: price.amount,
          amountAtomic: price.amount_atomic,
          currency: price.currency,
          cadence: price.cadence,
          intervalSeconds: price.interval_seconds,
          network: price.network,
          chainId: price.chain_id,
          contractAddress: token.token.subscriptionContract,
          onchainId: `0x${randomBytes(16).toString('hex')}`,
          platformFeeBps: req.auth.platformFeeBps,
        });
        const object = presentSubscription(created);
        await emitEvent(tx, req.auth, 'subscription.created', 'subscription', created.id, object);
        return object;
      });
      return { data: sub };
    },
  );
}
