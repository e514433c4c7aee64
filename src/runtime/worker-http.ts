// The worker's own small HTTP port (WORKER_PORT): orchestrators probe workers too.
import Fastify, { type FastifyInstance } from 'fastify';
import type { Queryable } from '../db/pool.js';
import { registerHealth, type Readiness } from '../http/plugins/health.js';
import { registerMetrics } from '../http/plugins/metrics.js';
import type { Logger } from '../log.js';
import type { Metrics } from '../observability/metrics.js';

export async function startWorkerHttp(
  opts: { port: number; host: string; db: Queryable; readiness: Readiness; metrics: Metrics },
  log: Logger,
): Promise<FastifyInstance> {
  const app = Fastify({ loggerInstance: log.child({ component: 'worker-http' }), disableRequestLogging: true }) as unknown as FastifyInstance;
  registerMetrics(app, opts.metrics);
  registerHealth(app, { db: opts.db, readiness: opts.readiness });
  await app.listen({ port: opts.port, host: opts.host });
  return app;
}
