// The queue dashboard (bull-board) at /admin/queues, behind HTTP basic auth from config. Job data
// shown there is ids only ({invoiceId, deliveryId}): no customer email bodies, no secrets.
import { timingSafeEqual } from 'node:crypto';
import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { FastifyAdapter } from '@bull-board/fastify';
import fp from 'fastify-plugin';
import { createFailureLimiter } from '../failure-limiter.js';

import type { QueueBackendKind } from '../../config.js';
import { ApiError, errorEnvelope } from '../../errors.js';
import type { AppQueue } from '../../queue/backend.js';

/**
 * Wrong dashboard passwords per client address AND account name before that pair gets 429 for
 * the rest of the window, the right password included (were it let through, a guesser would
 * still learn which guess was right, and the lock would not slow guessing at all). Another
 * account name from the same address is not locked, up to DASHBOARD_MAX_FAILURES_PER_ADDRESS
 * failures over all names, which bounds what rotating made-up names can cost.
 */
export const DASHBOARD_MAX_FAILURES = 10;
export const DASHBOARD_MAX_FAILURES_PER_ADDRESS = 10 * DASHBOARD_MAX_FAILURES;
export const DASHBOARD_FAILURE_WINDOW_MS = 10 * 60_000;

export const DASHBOARD_PATH = '/admin/queues';

function safeEqual(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/**
 * What the dashboard cannot show on BullMQ's Postgres backend, said on the page (each queue's
 * description) rather than failing: bull-board's Redis panel reads Redis INFO.
 */
export const POSTGRES_DASHBOARD_NOTE =
  'Queue backend: PostgreSQL (schema bullmq). The Redis memory and clients panel does not apply; the server panel shows PostgreSQL.';

export interface DashboardOptions {
  queues: AppQueue[];
  credentials: { user: string; password: string };
  backend: QueueBackendKind;
}

/** The dashboard and its basic-auth hook, in a scope of their own under DASHBOARD_PATH. */
export const dashboardPlugin = fp<DashboardOptions>(
  async (app, { queues, credentials, backend }) => {
    const serverAdapter = new FastifyAdapter();
    serverAdapter.setBasePath(DASHBOARD_PATH);
    const options = backend === 'postgres' ? { description: POSTGRES_DASHBOARD_NOTE } : {};
    // bull-board's adapter is typed for the Redis backend's Queue; it reads the Postgres one too.
    createBullBoard({ queues: queues.map((q) => new BullMQAdapter(q as ConstructorParameters<typeof BullMQAdapter>[0], options)), serverAdapter });
    const byName = createFailureLimiter({ maxFailures: DASHBOARD_MAX_FAILURES, windowMs: DASHBOARD_FAILURE_WINDOW_MS });
    const byAddress = createFailureLimiter({ maxFailures: DASHBOARD_MAX_FAILURES_PER_ADDRESS, windowMs: DASHBOARD_FAILURE_WINDOW_MS });
    await app.register(async (scope) => {
      scope.addHook('onRequest', async (req, reply) => {
        const header = req.headers.authorization ?? '';
        const [scheme, encoded] = header.split(' ');
        const [user = '', ...rest] = scheme === 'Basic' && encoded ? Buffer.from(encoded, 'base64').toString('utf8').split(':') : [];
        // NUL cannot occur in a basic-auth user name's header text: it separates address and name.
        const nameKey = `${req.ip}\u0000${user.slice(0, 128)}`;
        const tooMany = (waitMs: number) =>
          reply
            .status(429)
            .header('retry-after', String(Math.ceil(waitMs / 1000)))
            .send(errorEnvelope(new ApiError('rate_limited', 'Too many failed dashboard logins from this address; retry after the Retry-After delay.')));
        const addressWait = await byAddress.take(req.ip);
        if (addressWait > 0) return tooMany(addressWait);
        const nameWait = await byName.take(nameKey);
        if (nameWait > 0) {
          byAddress.release(req.ip, 'succeeded');
          return tooMany(nameWait);
        }
        const ok = user !== '' && safeEqual(user, credentials.user) && safeEqual(rest.join(':'), credentials.password);
        // A browser's first request carries no credentials: only a wrong pair counts as a failure.
        const outcome = ok || header === '' ? 'succeeded' : 'failed';
        byName.release(nameKey, outcome);
        byAddress.release(req.ip, outcome);
        if (!ok) {
          return reply
            .status(401)
            .header('www-authenticate', 'Basic realm="queues", charset="UTF-8"')
            .send(errorEnvelope(new ApiError('dashboard_auth_required', 'The queue dashboard needs the admin credentials.')));
        }
      });
      await scope.register(serverAdapter.registerPlugin(), { prefix: DASHBOARD_PATH });
    });
  },
  { name: 'dashboard' },
);
