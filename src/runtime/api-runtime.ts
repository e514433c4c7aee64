// Wires the API process: pool, producer queues, the outbox fast path, then the Fastify app.
import type { Config } from '../config.js';
import { createPool, type Pool } from '../db/pool.js';
import { buildApp } from '../http/app.js';
import type { Api, AppDeps } from '../http/types.js';
import type { Logger } from '../log.js';
import { allQueues, openQueues, type QueueSet } from '../queue/queues.js';
import { createReminderService, type ReminderService } from '../queue/reminder-service.js';
import { createReminderShardSet } from '../queue/reminder-shard-set.js';
import { createMetrics } from '../observability/metrics.js';
import { DASHBOARD_PATH, dashboardPlugin } from '../http/plugins/dashboard.js';
import { createOutboxRelay, fastPathPublisher } from '../queue/outbox-relay.js';
import { claimQueueStorage, queueBackendOf } from '../queue/backend.js';
import { withTimeout } from '../lib/with-timeout.js';
import { startWorkerHttp } from './worker-http.js';
import { createPdfRenderPool } from '../pdf/render-pool.js';
import type { FastifyInstance } from 'fastify';
import { claimRedisPrefix } from './redis-prefix.js';
import { StartupError } from './startup-error.js';
import { operatorAddressOf, readRelayerKeys } from './relayer-runtime.js';

const FAST_PATH_TIMEOUT_MS = 2_000;

export interface ApiRuntime {
  app: Api;
  /** Serves /metrics (and /healthz, /readyz) on METRICS_PORT; returns the bound port. */
  listenMetrics(): Promise<number>;
  pool: Pool;
  queues: QueueSet;
  reminders: ReminderService;
  close(): Promise<void>;
}

export async function createApiRuntime(config: Config, log: Logger, extra: Partial<AppDeps> = {}): Promise<ApiRuntime> {
  // The relayer's addresses name the operator of new subscriptions (read first: a refused key file
  // stops the start before anything is open). A test may hand its own.
  const operatorAddress = extra.operatorAddress ?? operatorAddressOf(config, readRelayerKeys(config));
  // Postgres queue backend: its bullmq schema must be this database's (a ConfigError otherwise).
  await claimQueueStorage(config);
  const pool = createPool(config.databaseUrl);
  // This REDIS_PREFIX must be this database's: the API enqueues sends that workers of the
  // prefix's database would otherwise take. Redis (or Postgres) away at start does not stop the
  // API (the outbox covers sends): the claim is retried in the background, and another
  // database's claim found then ends the process as it would have at start.
  let claimRetry: NodeJS.Timeout | undefined;
  try {
    await claimRedisPrefix(config, pool, log);
  } catch (err) {
    if (err instanceof StartupError) {
      await pool.end();
      throw err;
    }
    log.warn({ err }, 'cannot check the Redis prefix claim yet; retrying in the background');
    claimRetry = setInterval(() => {
      claimRedisPrefix(config, pool, log).then(
        () => clearInterval(claimRetry),
        (e: unknown) => {
          if (!(e instanceof StartupError)) return;
          log.fatal({ variable: e.variable }, e.message);
          process.exit(1);
        },
      );
    }, 5_000);
    claimRetry.unref();
  }
  // Producer side: a call fails at once while the queue store is away (see backend.ts); on Redis
  // or a Redis Cluster (REDIS_CLUSTER_NODES) alike.
  const backend = queueBackendOf(config, 'producer');
  // A Queue emits 'error' while its store is away; the outbox covers those jobs, so log and go on.
  const queueSet = openQueues(backend, (err, queue) => log.debug({ err, queue }, 'queue connection error'));
  // The API places schedulers too (reminders on, paid through the test helper): it is a member of
  // the shard membership, refreshed every RECONCILE_EVERY, and it cancels under every known count.
  const shards = createReminderShardSet(pool, queueSet.reminders, config.reminderShards, config.reconcileEvery.toMillis());
  const refreshShards = () =>
    withTimeout(shards.refresh(), FAST_PATH_TIMEOUT_MS, 'reminder shard membership').catch((err: unknown) =>
      log.warn({ err }, 'could not refresh the reminder shard membership; will retry'),
    );
  await refreshShards();
  const heartbeat = setInterval(() => void refreshShards(), config.reconcileEvery.toMillis());
  heartbeat.unref();
  const reminders = createReminderService(pool, shards, backend, config.reminders);
  const relay = createOutboxRelay(pool, queueSet);
  const queues = allQueues(queueSet);
  const metrics = createMetrics({ queues, db: pool });
  const plugins: AppDeps['plugins'] = [];
  if (config.adminUser && config.adminPassword) {
    const credentials = { user: config.adminUser, password: config.adminPassword };
    plugins.push(async (app) => app.register(dashboardPlugin, { queues, credentials, backend: backend.kind }));
    log.info({ path: DASHBOARD_PATH }, 'queue dashboard on');
  } else {
    log.info('queue dashboard off: set ADMIN_USER and ADMIN_PASSWORD to turn it on');
  }
  const pdf = config.pdfRenderThreads > 0 ? createPdfRenderPool(config.pdfRenderThreads) : null;
  const app = await buildApp({
    config,
    pool,
    log,
    metrics,
    ...(pdf ? { renderPdf: (doc, kind) => pdf.render(doc, kind) } : {}),
    readiness: backend.readiness,
    plugins,
    operatorAddress,
    outbox: fastPathPublisher(relay, FAST_PATH_TIMEOUT_MS),
    reminders: {
      stop: (id) => withTimeout(reminders.stop(id), FAST_PATH_TIMEOUT_MS, 'reminder stop'),
      resume: (id) => withTimeout(reminders.resume(id), FAST_PATH_TIMEOUT_MS, 'reminder resume'),
    },
    ...extra,
  });
  // The pause a person would otherwise wonder about (a second or more): Fastify compiles every
  // route's validators and response serializers before it listens.
  const compiling = Date.now();
  log.info('compiling the API routes\' request validators and response serializers (a second or two)');
  await app.ready();
  log.debug({ duration_ms: Date.now() - compiling }, 'API routes compiled');
  let metricsHttp: FastifyInstance | null = null;
  return {
    app,
    pool,
    queues: queueSet,
    reminders,
    async listenMetrics() {
      const listen = { port: config.metricsPort, host: config.host, variable: 'METRICS_PORT', fallbackToAny: config.metricsPortFallback, movesWhenUnset: true };
      const started = await startWorkerHttp({ listen, db: pool, readiness: backend.readiness, metrics, component: 'api-metrics' }, log);
      metricsHttp = started.app;
      log.info({ port: started.port }, 'API metrics on METRICS_PORT');
      return started.port;
    },
    async close() {
      clearInterval(heartbeat);
      clearInterval(claimRetry);
      await metricsHttp?.close();
      await app.close();
      await withTimeout(shards.leave(), FAST_PATH_TIMEOUT_MS, 'leave the shard membership').catch(() => undefined);
      await pdf?.close();
      // A queue that never reached its store may never finish closing: bounded.
      await withTimeout(Promise.all(queues.map((q) => q.close())), 2_000, 'queue close').catch(() => undefined);
      await backend.close();
      await pool.end();
    },
  };
}
