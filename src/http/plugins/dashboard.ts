// The queue dashboard (bull-board) at /admin/queues, behind HTTP basic auth from config. Job data
// shown there is ids only ({invoiceId, deliveryId}): no customer email bodies, no secrets.
import { timingSafeEqual } from 'node:crypto';
import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { FastifyAdapter } from '@bull-board/fastify';
import type { Queue } from 'bullmq';
import type { FastifyInstance } from 'fastify';
import { createFailureLimiter } from '../failure-limiter.js';

/** Wrong dashboard credentials per client address before it gets 429 for the rest of the window. */
export const DASHBOARD_MAX_FAILURES = 10;
export const DASHBOARD_FAILURE_WINDOW_MS = 10 * 60_000;

export const DASHBOARD_PATH = '/admin/queues';

function safeEqual(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

export async function registerDashboard(app: FastifyInstance, queues: Queue[], credentials: { user: string; password: string }): Promise<void> {
  const serverAdapter = new FastifyAdapter();
  serverAdapter.setBasePath(DASHBOARD_PATH);
  createBullBoard({ queues: queues.map((q) => new BullMQAdapter(q)), serverAdapter });
  const failures = createFailureLimiter({ maxFailures: DASHBOARD_MAX_FAILURES, windowMs: DASHBOARD_FAILURE_WINDOW_MS });
  await app.register(async (scope) => {
    scope.addHook('onRequest', async (req, reply) => {
      const waitMs = await failures.blockedFor(req.ip);
      if (waitMs > 0) {
        return reply
          .status(429)
          .header('retry-after', String(Math.ceil(waitMs / 1000)))
          .send({ error: { type: 'invalid_request_error', code: 'rate_limited', message: 'Too many failed dashboard logins from this address; retry after the Retry-After delay.' } });
      }
      const header = req.headers.authorization ?? '';
      const [scheme, encoded] = header.split(' ');
      const [user, ...rest] = scheme === 'Basic' && encoded ? Buffer.from(encoded, 'base64').toString('utf8').split(':') : [];
      if (!user || !safeEqual(user, credentials.user) || !safeEqual(rest.join(':'), credentials.password)) {
        // A browser's first request carries no credentials: only a wrong pair counts as a failure.
        if (header !== '') await failures.fail(req.ip);
        return reply
          .status(401)
          .header('www-authenticate', 'Basic realm="queues", charset="UTF-8"')
          .send({ error: { type: 'authentication_error', code: 'dashboard_auth_required', message: 'The queue dashboard needs the admin credentials.' } });
      }
    });
    await scope.register(serverAdapter.registerPlugin(), { prefix: DASHBOARD_PATH });
  });
}
