// A process's internal HTTP port: health and Prometheus metrics. The worker's WORKER_PORT
// (orchestrators probe workers too) and the API's METRICS_PORT (/metrics is not public).
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { Queryable } from '../db/pool.js';
import { ApiError, errorEnvelope } from '../errors.js';
import { healthPlugin, type Readiness } from '../http/plugins/health.js';
import { metricsPlugin } from '../http/plugins/metrics.js';
import type { Logger } from '../log.js';
import type { Metrics } from '../observability/metrics.js';
import { listenOn, type PortSetting } from './listen.js';

export async function startWorkerHttp(
  opts: { listen: PortSetting; db: Queryable; readiness: Readiness; metrics: Metrics; component?: string },
  log: Logger,
): Promise<{ app: FastifyInstance; port: number }> {
  const loggerInstance: FastifyBaseLogger = log.child({ component: opts.component ?? 'worker-http' });
  const app = Fastify({ loggerInstance, logController: new LogController({ disableRequestLogging: true }) });
  await app.register(metricsPlugin, { metrics: opts.metrics, serve: true });
  await app.register(healthPlugin, { db: opts.db, readiness: opts.readiness });
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
