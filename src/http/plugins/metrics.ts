import fp from 'fastify-plugin';
import type { Metrics } from '../../observability/metrics.js';

export interface MetricsOptions {
  metrics: Metrics;
  /** Also serve GET /metrics: only on an internal port (the worker's, the API's METRICS_PORT). */
  serve: boolean;
}

/**
 * The HTTP duration histogram of the instance's requests, by route pattern, and with `serve`
 * GET /metrics (Prometheus text format). Not encapsulated: it observes the routes of the
 * instance it is registered on.
 */
export const metricsPlugin = fp<MetricsOptions>(
  async (app, { metrics, serve }) => {
    app.addHook('onResponse', async (req, reply) => {
      // The route pattern, not the URL: ids would make every invoice a label of its own.
      const route = req.routeOptions.url ?? 'unmatched';
      metrics.httpDuration.observe({ method: req.method, route, status: String(reply.statusCode) }, reply.elapsedTime / 1000);
    });
    if (!serve) return;
    app.get('/metrics', { schema: { hide: true } }, async (_req, reply) => {
      reply.header('content-type', metrics.registry.contentType);
      return metrics.registry.metrics();
    });
  },
  { name: 'metrics' },
);
