import type { FastifyInstance } from 'fastify';
import type { Metrics } from '../../observability/metrics.js';

/** GET /metrics (Prometheus text format) and the HTTP duration histogram, by route pattern. */
export function registerMetrics(app: FastifyInstance, metrics: Metrics): void {
  observeHttpDurations(app, metrics);
  serveMetrics(app, metrics);
}

/** The HTTP duration histogram of this app's requests, by route pattern. */
export function observeHttpDurations(app: FastifyInstance, metrics: Metrics): void {
  app.addHook('onResponse', async (req, reply) => {
    // The route pattern, not the URL: ids would make every invoice a label of its own.
    const route = req.routeOptions.url ?? 'unmatched';
    metrics.httpDuration.observe({ method: req.method, route, status: String(reply.statusCode) }, reply.elapsedTime / 1000);
  });
}

/** GET /metrics: on an internal port only (the worker's, the API's METRICS_PORT). */
export function serveMetrics(app: FastifyInstance, metrics: Metrics): void {
  app.get('/metrics', { schema: { hide: true } }, async (_req, reply) => {
    reply.header('content-type', metrics.registry.contentType);
    return metrics.registry.metrics();
  });
}
