// Sandbox-only helpers that do what the on-chain payment detector would: pay an invoice, take a
// payment on a link. A live key gets 403 (`sandboxOnly`, checked with the key: auth.ts).
// (Subscriptions are made on a chain only: see docs/subscriptions.md.)
import { Type } from 'typebox';
import type { AppDeps } from '../types.js';
import { payInvoice, recordLinkPayment } from '../../invoicing/sandbox-payments.js';
import { presentInvoice, presentLinkPayment } from '../presenters.js';
import { Data, PaymentLinkIdParams, Invoice, InvoiceIdParams, LinkPayment, LinkPaymentBody } from '../schemas/index.js';
import type { Api } from '../types.js';
import { errorResponses } from '../route-helpers.js';

export async function testHelperRoutes(app: Api, deps: AppDeps): Promise<void> {
  const { pool } = deps;
  const opts = { tags: ['test helpers'] };

  app.post(
    '/test_helpers/invoices/:invoiceId/pay',
    { config: { sandboxOnly: true }, schema: { ...opts, summary: 'Mark an open or overdue sandbox invoice paid', params: InvoiceIdParams, response: { 200: Data(Invoice), ...errorResponses } } },
    async (req) => {
      return { data: presentInvoice(await payInvoice(deps, req.auth, req.params.invoiceId, req.log), deps.config.chains) };
    },
  );

  app.post(
    '/test_helpers/payment-links/:paymentLinkId/payments',
    {
      config: { sandboxOnly: true },
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
      return { data: presentLinkPayment(await recordLinkPayment(pool, req.auth, req.params.paymentLinkId, req.body ?? {})) };
    },
  );
}
