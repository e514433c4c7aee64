// Subscriptions (docs/subscriptions.md): made by the watcher from a confirmed on-chain subscribe;
// here they are read, listed with their period invoices, and canceled by the merchant.
import { listInvoices } from '../../db/invoices.js';
import { withTransaction } from '../../db/pool.js';
import { cancelSubscription, findSubscription, listSubscriptions } from '../../db/subscriptions.js';
import { ApiError, notFound } from '../../errors.js';
import type { AppDeps } from '../types.js';
import { coerceLimit, listBody, pageRequest } from '../pagination.js';
import { presentInvoice, presentSubscription } from '../presenters.js';
import { Data, Invoice, ListOf, ListSubscriptionsQuery, PageQuery, Subscription, SubscriptionIdParams } from '../schemas/index.js';
import type { Api } from '../types.js';
import { errorResponses } from '../route-helpers.js';

export async function subscriptionRoutes(app: Api, deps: AppDeps): Promise<void> {
  const { pool } = deps;

  app.get(
    '/subscriptions',
    {
      preValidation: coerceLimit,
      schema: {
        tags: ['subscriptions'],
        summary: 'List subscriptions, newest first, a page at a time (filters: status, customer_email)',
        querystring: ListSubscriptionsQuery,
        response: { 200: ListOf(Subscription), ...errorResponses },
      },
    },
    async (req) => {
      const q = req.query;
      const result = await listSubscriptions(pool, req.auth, { status: q.status, customerEmail: q.customer_email }, pageRequest(q));
      return listBody(result, 'subscription', presentSubscription);
    },
  );

  app.get(
    '/subscriptions/:subscriptionId',
    {
      schema: {
        tags: ['subscriptions'],
        summary: 'Retrieve a subscription with its period dates',
        params: SubscriptionIdParams,
        response: { 200: Data(Subscription), ...errorResponses },
      },
    },
    async (req) => {
      const sub = await findSubscription(pool, req.auth, req.params.subscriptionId);
      if (!sub) throw notFound('subscription', req.params.subscriptionId);
      return { data: presentSubscription(sub) };
    },
  );

  app.get(
    '/subscriptions/:subscriptionId/invoices',
    {
      preValidation: coerceLimit,
      schema: {
        tags: ['subscriptions'],
        summary: "List a subscription's period invoices, newest first, a page at a time",
        params: SubscriptionIdParams,
        querystring: PageQuery,
        response: { 200: ListOf(Invoice), ...errorResponses },
      },
    },
    async (req) => {
      const sub = await findSubscription(pool, req.auth, req.params.subscriptionId);
      if (!sub) throw notFound('subscription', req.params.subscriptionId);
      const result = await listInvoices(pool, req.auth, { subscriptionId: sub.id }, pageRequest(req.query));
      return listBody(result, 'invoice', (r) => presentInvoice(r, deps.config.chains));
    },
  );

  app.post(
    '/subscriptions/:subscriptionId/cancel',
    {
      schema: {
        tags: ['subscriptions'],
        summary: 'Cancel an active or past_due subscription: no further charge; the relayer also cancels it on-chain',
        params: SubscriptionIdParams,
        response: { 200: Data(Subscription), ...errorResponses },
      },
    },
    async (req) => {
      // One conditional update (src/db/subscriptions.ts): its triggers write subscription.canceled,
      // stop the dunning and plan the relayer's on-chain cancel, in this same transaction.
      const result = await withTransaction(pool, (tx) => cancelSubscription(tx, req.auth, req.params.subscriptionId, 'merchant'));
      if (result.outcome === 'not_found') throw notFound('subscription', req.params.subscriptionId);
      if (result.outcome === 'not_active') {
        throw new ApiError('subscription_not_active', `This subscription is already ${result.subscription.status}.`);
      }
      const sub = result.subscription;
      return { data: presentSubscription(sub) };
    },
  );
}
