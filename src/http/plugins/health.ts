// /healthz: the process is alive. /readyz: Postgres and the queue store (Redis, or BullMQ's schema
// with the Postgres backend) answer; 503 names the failing part.
// Shared by the API and the worker's own small HTTP port.
import fp from 'fastify-plugin';
import { pingDatabase, type Queryable } from '../../db/pool.js';
import { withTimeout } from '../../lib/with-timeout.js';

const CHECK_TIMEOUT_MS = 1_000;

async function check(name: string, probe: () => Promise<unknown>): Promise<[string, string]> {
  try {
    await withTimeout(probe(), CHECK_TIMEOUT_MS, name);
    return [name, 'ok'];
  } catch (err) {
    return [name, `unavailable: ${err instanceof Error ? err.message : String(err)}`];
  }
}

/** The queue store's check: `redis`, or `queue` (BullMQ's schema) with the Postgres backend. */
export interface Readiness {
  name: string;
  probe(): Promise<unknown>;
}

export interface HealthOptions {
  db: Queryable;
  readiness: Readiness;
}

/** GET /healthz and /readyz on the instance it is registered on (not encapsulated). */
export const healthPlugin = fp<HealthOptions>(
  async (app, deps) => {
    app.get('/healthz', { schema: { hide: true } }, async () => ({ status: 'ok' }));
    app.get('/readyz', { schema: { hide: true } }, async (_req, reply) => {
      const checks = Object.fromEntries(
        await Promise.all([check('postgres', () => pingDatabase(deps.db)), check(deps.readiness.name, deps.readiness.probe)]),
      );
      const failing = Object.entries(checks).filter(([, v]) => v !== 'ok').map(([k]) => k);
      if (failing.length) return reply.status(503).send({ status: 'unavailable', failing, checks });
      return { status: 'ok', checks };
    });
  },
  { name: 'health' },
);
