import { findSubscription } from '../../db/subscriptions.js';
import { notFound } from '../../errors.js';
import type { AppDeps } from '../types.js';
import { presentSubscription } from '../presenters.js';
import { Data, Subscription, SubscriptionIdParams } from '../schemas/index.js';
import type { Api } from '../types.js';
import { errorResponses } from '../route-helpers.js';

export async function subscriptionRoutes(app: Api, deps: AppDeps): Promise<void> {
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
      const sub = await findSubscription(deps.pool, req.auth, req.params.subscriptionId);
      if (!sub) throw notFound('subscription', req.params.subscriptionId);
      return { data: presentSubscription(sub) };
    },
  );
}
