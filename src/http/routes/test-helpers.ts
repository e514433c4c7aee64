// Sandbox-only helpers that do what the on-chain payment detector would: pay an invoice, take a
// payment on a link, start a subscription. A live key gets 403.
import { randomBytes } from 'node:crypto';
import { Type } from 'typebox';
import { zeroAddress } from 'viem';
import { upsertCustomer } from '../../db/customers.js';
import { emitEvent } from '../../db/events.js';
import { withTransaction } from '../../db/pool.js';
import { findPriceForUse } from '../../db/products.js';
import { insertSubscription } from '../../db/subscriptions.js';
import { newId } from '../../domain/ids.js';
import { resolveToken } from '../../domain/tokens.js';
import { ApiError } from '../../errors.js';
import type { AppDeps } from '../types.js';
import { requireWrite, type AuthContext } from '../auth.js';
import { payInvoice, recordLinkPayment } from '../../invoicing/sandbox-payments.js';
import { presentInvoice, presentLinkPayment, presentSubscription } from '../presenters.js';
import { Data, ErrorEnvelope, PaymentLinkIdParams, Invoice, InvoiceIdParams, LinkPayment, LinkPaymentBody, StartSubscriptionBody, Subscription } from '../schemas/index.js';
import type { Api } from '../types.js';
import { errorResponses } from '../route-helpers.js';

function requireSandbox(auth: AuthContext): void {
  if (auth.environment !== 'sandbox') {
    throw new ApiError('live_mode_forbidden', 'Test helpers exist in the sandbox only; use a sandbox key.');
  }
  requireWrite(auth);
}

export async function testHelperRoutes(app: Api, deps: AppDeps): Promise<void> {
  const { pool } = deps;
  const opts = { tags: ['test helpers'] };

  app.post(
    '/test_helpers/invoices/:invoiceId/pay',
    { schema: { ...opts, summary: 'Mark an open or overdue sandbox invoice paid', params: InvoiceIdParams, response: { 200: Data(Invoice), ...errorResponses } } },
    async (req) => {
      requireSandbox(req.auth);
      return { data: presentInvoice(await payInvoice(deps, req.auth, req.params.invoiceId, req.log), deps.config.chains) };
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
      return { data: presentLinkPayment(await recordLinkPayment(pool, req.auth, req.params.paymentLinkId, req.body ?? {})) };
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
        const token = resolveToken(deps.config.chains, req.auth.environment, price.network, price.currency);
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
          // Not on any chain (nothing is charged): no contract address but the zero one.
          contractAddress: zeroAddress,
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
