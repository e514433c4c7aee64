// A process's internal HTTP port: health and Prometheus metrics. The worker's WORKER_PORT
// (orchestrators probe workers too) and the API's METRICS_PORT (/metrics is not public).
import Fastify, { LogController, type FastifyInstance } from 'fastify';
import type { Queryable } from '../db/pool.js';
import { ApiError, errorEnvelope } from '../errors.js';
import { registerHealth, type Readiness } from '../http/plugins/health.js';
import { registerMetrics } from '../http/plugins/metrics.js';
import type { Logger } from '../log.js';
import type { Metrics } from '../observability/metrics.js';
import { listenOn, type PortSetting } from './listen.js';

export async function startWorkerHttp(
  opts: { listen: PortSetting; db: Queryable; readiness: Readiness; metrics: Metrics; component?: string },
  log: Logger,
): Promise<{ app: FastifyInstance; port: number }> {
  const app = Fastify({ loggerInstance: log.child({ component: opts.component ?? 'worker-http' }), logController: new LogController({ disableRequestLogging: true }) }) as unknown as FastifyInstance;
  registerMetrics(app, opts.metrics);
  registerHealth(app, { db: opts.db, readiness: opts.readiness });
  // The spec's envelope here too, not Fastify's own body: probes and scrapers read one format.
  app.setNotFoundHandler((req, reply) => {
    const err = new ApiError('route_not_found', `No route ${req.method} ${req.url.split('?')[0]}.`);
    return reply.status(err.status).send(errorEnvelope(err));
  });
  try {
    const port = await listenOn(app, opts.listen, log);
    return { app, port };
  } catch (err) {
    await app.close();
    throw err;
  }
}
