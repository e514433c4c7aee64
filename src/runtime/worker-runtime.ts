// Wires a worker process: its pool, mail transport, queues, and the parts that run on them: the
// BullMQ workers dispatching to the handlers the entrypoint hands in (queue-workers.ts), the
// outbox relay loop, and the reminder upkeep (stop notifications, reconciler). Several such
// processes may run on one queue store (Redis, a Redis Cluster, or the Postgres backend's schema)
// and one Postgres.
import type { FastifyInstance } from 'fastify';
import type { Config } from '../config.js';
import { createPool, type Pool } from '../db/pool.js';
import { redactUrl, type Logger } from '../log.js';
import { loadEmailTemplates } from '../mail/render-email.js';
import { createMailRouter, type MailTransport } from '../mail/transport.js';
import { createMetrics, type Metrics } from '../observability/metrics.js';
import type { JobObserver } from '../queue/dispatcher.js';
import type { JobContext, JobHandlers, SubscriptionRelayer } from '../queue/job-context.js';
import { allQueues, openQueues, queueNamed, type QueueSet } from '../queue/queues.js';
import { claimQueueStorage, queueBackendOf, type AppQueue, type AppWorker } from '../queue/backend.js';
import { createReminderService, type ReminderService } from '../queue/reminder-service.js';
import { createReminderShardSet } from '../queue/reminder-shard-set.js';
import { QUEUES } from '../queue/catalogue.js';
import { listen } from '../db/listen.js';
import { presentEvent } from '../http/presenters.js';
import { createWebhookSender } from '../webhooks/sender.js';
import { startWebhookDeliveryLoop, type WebhookDeliveryLoop } from './webhook-delivery-loop.js';
import { startUpkeepSchedulers } from './guarded-schedulers.js';
import { createChainWatcher } from '../chain/watcher.js';
import { describeWatched, isWatched } from '../domain/chains.js';
import { startOutboxRelayLoop } from './outbox-relay-loop.js';
import { startQueueWorkers } from './queue-workers.js';
import { startReminderUpkeep } from './reminder-upkeep.js';
import { startWorkerHttp } from './worker-http.js';
import { createPdfRenderPool, type PdfRenderPool } from '../pdf/render-pool.js';
import { describePolicy } from '../domain/reminder-schedule.js';
import { claimRedisPrefix, claimRedisPrefixOrWait } from './redis-prefix.js';
import { createRelayer, type Relayer } from '../chain/relayer.js';
import { readRelayerKeys, startRelayerUpkeep } from './relayer-runtime.js';

export interface WorkerRuntime {
  pool: Pool;
  mail: MailTransport;
  queues: QueueSet;
  workers: AppWorker[];
  reminders: ReminderService;
  metrics: Metrics;
  /** The PDF thread pool (null with PDF_RENDER_THREADS=0). */
  pdf: PdfRenderPool | null;
  /** The worker's health and metrics port. */
  http: FastifyInstance;
  /** The relayer (subscription charges and cancels); null when no chain has a key. */
  relayer: Relayer | null;
  /** Runs the outbox relay once now (also runs on its timer). */
  relayOutbox(): Promise<number>;
  close(): Promise<void>;
}

export interface WorkerRuntimeOptions {
  observer?: JobObserver;
  /** A transport to use instead of the configured one. */
  mail?: MailTransport;
  /** The relayer that charges and cancels subscriptions on-chain; unset: this process charges none. */
  relayer?: SubscriptionRelayer;
}

/** `handlers`: the job registry (jobs/index.ts), handed in by the entrypoint. */
export async function createWorkerRuntime(config: Config, log: Logger, handlers: JobHandlers, opts: WorkerRuntimeOptions = {}): Promise<WorkerRuntime> {
  // Compile the email templates now: a missing or broken one fails the start, not a send.
  loadEmailTemplates();
  // The relayer's keys, read once, before anything is opened: a key file others may read stops the start in one line.
  const relayerKeys = readRelayerKeys(config);
  // Postgres queue backend: its bullmq schema must be this database's (a ConfigError otherwise).
  await claimQueueStorage(config);
  const pool = createPool(config.databaseUrl, config.workerConcurrency * 2 + 5);
  const mail =
    opts.mail ??
    createMailRouter({ smtpUrl: config.smtpUrl, sandboxSmtpUrl: config.sandboxSmtpUrl, poolSize: config.smtpPoolSize, outboxDir: config.outboxDir });
  const backend = queueBackendOf(config, 'consumer');
  const queues = openQueues(backend, (err) => log.warn({ err, backend: backend.kind }, 'queue connection error'));

  // Before anything touches the queues: this prefix must be this database's.
  try {
    await claimRedisPrefixOrWait(config, pool, log);
  } catch (err) {
    await Promise.all(allQueues(queues).map((q) => q.close())).catch(() => undefined);
    await backend.close();
    await mail.close();
    await pool.end();
    throw err;
  }
  const shards = createReminderShardSet(pool, queues.reminders, config.reminderShards, config.reconcileEvery.toMillis());
  // Which shards to consume: this count's, and any other count still in use or not drained.
  await shards.refresh().catch((err) => log.warn({ err }, 'could not read the reminder shard membership; consuming this process\'s shards only'));
  const reminders = createReminderService(pool, shards, backend, config.reminders);
  const metrics = createMetrics({ queues: allQueues(queues), db: pool });
  // The health port first: a start that cannot bind it (WORKER_PORT taken) ends before this
  // process takes a single job.
  let http: FastifyInstance;
  let httpPort: number;
  try {
    ({ app: http, port: httpPort } = await startWorkerHttp(
      { listen: { port: config.workerPort, host: config.host, variable: 'WORKER_PORT', fallbackToAny: config.workerPortFallback, movesWhenUnset: true }, db: pool, readiness: backend.readiness, metrics },
      log,
    ));
  } catch (err) {
    await Promise.all(allQueues(queues).map((q) => q.close())).catch(() => undefined);
    await backend.close();
    await mail.close();
    await pool.end();
    throw err;
  }
  const observer: JobObserver = {
    onOutcome(name, outcome, durationMs) {
      metrics.jobDuration.observe({ name, outcome }, durationMs / 1000);
      opts.observer?.onOutcome?.(name, outcome, durationMs);
    },
  };
  const pdf = config.pdfRenderThreads > 0 ? createPdfRenderPool(config.pdfRenderThreads, { warm: true }) : null;
  const sender = createWebhookSender({
    timeoutMs: config.webhooks.timeoutMs,
    allowPrivate: config.webhooks.allowPrivateNetworks,
    perEndpoint: config.webhooks.endpointConcurrency,
  });
  // Started below, once the queues' workers are; the fan-out job may wake it before.
  let deliveryLoop: WebhookDeliveryLoop | null = null;
  const watched = config.chains.filter(isWatched);
  const chainWatcher = watched.length > 0 ? createChainWatcher({ pool, chains: config.chains, maxBlocks: config.chainGetLogsMaxBlocks, rpcQuorum: config.chainRpcQuorum, log, metrics: metrics.chain }) : null;
  const relayer = relayerKeys.length > 0 ? createRelayer({ pool, chains: config.chains, keys: relayerKeys, stuckBlocks: config.relayerStuckBlocks, minBalance: config.relayerMinBalance, log, metrics: metrics.relayer }) : null;
  const ctx: JobContext = {
    config,
    pool,
    ...(relayer ? { relayer } : {}),
    ...(chainWatcher ? { watchChain: (chainId: number) => chainWatcher.run(chainId) } : {}),
    mail,
    reminders,
    ...(pdf ? { renderPdf: (doc, kind) => pdf.render(doc, kind) } : {}),
    countEmail: (kind, outcome) => metrics.emails.inc({ kind, outcome }),
    observeReminderLateness: (seconds) => metrics.reminderLateness.observe(seconds),
    ...(opts.relayer ? { relayer: opts.relayer } : {}),
    observeChargeLateness: (seconds) => metrics.chargeLateness.observe(Math.max(0, seconds)),
    countSubscriptionWork: (job, outcome) => metrics.subscriptionWork.inc({ job, outcome }),
    webhooks: {
      deliveriesDue: () => deliveryLoop?.wake(),
    },
  };
  const { workers, consumeReminderShards } = startQueueWorkers(
    handlers,
    ctx,
    {
      backend,
      concurrency: config.workerConcurrency,
      lockDuration: config.workerLockDurationMs,
      stalledInterval: config.workerStalledIntervalMs,
      webhookConcurrency: config.webhooks.concurrency,
      // One scan per watched chain, beside the subscription charge and cancel runs.
      chainConcurrency: watched.length + 2,
    },
    log,
    observer,
    shards.layout().consumed,
  );
  const reconcileEveryMs = config.reconcileEvery.toMillis();
  // The upkeep jobs, on the schedulers their catalogue entries ask for. Reminder shard 0 is the
  // home of the reminder role's, whatever the shard count.
  const schedulers = await startUpkeepSchedulers(
    (name) => (name === QUEUES.reminders ? queues.reminders.shard(0) : queueNamed(queues, name)),
    config,
    reconcileEveryMs,
    log,
  );
  // A Redis flush takes the prefix's claim with it: claim it again (or learn another database did).
  const claimGuard = setInterval(() => {
    claimRedisPrefix(config, pool, log).catch((err) => log.error({ err }, 'redis prefix claim check failed'));
  }, reconcileEveryMs);
  claimGuard.unref();
  const upkeep = startReminderUpkeep(config.databaseUrl, reminders, log, {
    everyMs: reconcileEveryMs,
    consume: (count) => {
      const started = consumeReminderShards(count);
      if (started.length > 0) log.info({ shards: count }, 'consuming more reminder shards');
    },
  });
  deliveryLoop = startWebhookDeliveryLoop(
    {
      db: pool,
      sender,
      retry: { baseMs: config.webhooks.backoffBaseMs, maxMs: config.webhooks.backoffMaxMs, windowMs: config.webhooks.retryWindowMs },
      renderEvent: (e) => presentEvent(e, config.chains),
      countDelivery: (outcome) => metrics.webhookDeliveries.inc({ outcome }),
      observeDeliveryLatency: (seconds) => metrics.webhookLatency.observe(seconds),
    },
    { concurrency: config.webhooks.concurrency, perEndpoint: config.webhooks.endpointConcurrency, timeoutMs: config.webhooks.timeoutMs },
    log,
  );
  const webhookLoop = deliveryLoop;
  // emit_event NOTIFYs at commit when it wrote deliveries, whoever wrote the event.
  const deliveriesListener = listen(config.databaseUrl, 'webhook_deliveries_due', () => webhookLoop.wake(), log);
  const relayerUpkeep = relayer && relayer.describe().length > 0 ? startRelayerUpkeep(relayer, config.chainPollIntervalMs, log) : null;
  const relayLoop = startOutboxRelayLoop(pool, queues, config.outboxRelayIntervalMs, log, metrics);
  // An insert into the outbox NOTIFYs at commit (a statement trigger) unless every row it wrote is
  // held for the API's own hand-over: relay at once rather than at the next tick, whoever wrote the
  // row (a job, a trigger on plain SQL, the API giving back a row its hand-over failed).
  const outboxListener = listen(
    config.databaseUrl,
    'outbox_pending',
    () => {
      relayLoop.relayNow().catch((err) => log.warn({ err }, 'outbox relay failed; the timer will retry'));
    },
    log,
  );

  log.info(
    {
      concurrency: config.workerConcurrency,
      pdf_render_threads: config.pdfRenderThreads,
      queue_backend: backend.kind,
      redis_cluster: config.redisClusterNodes !== null,
      reminder_shards: shards.layout(),
      mail: {
        live: config.smtpUrl ? redactUrl(config.smtpUrl) : `files in ${config.outboxDir}`,
        sandbox: config.sandboxSmtpUrl ? redactUrl(config.sandboxSmtpUrl) : `files in ${config.outboxDir}`,
      },
      port: httpPort,
      // What the schedules of this worker follow; a change moves open invoices at the next reconcile.
      reminder_policy: describePolicy(config.reminders),
      watched_chains: watched.length > 0 ? describeWatched(watched) : 'none (set CHAINS_FILE or RPC_URL_<chainId>)',
      // Addresses and where each key came from; never a key.
      relayer: relayer && relayer.describe().length > 0 ? relayer.describe() : 'none (set RELAYER_PRIVATE_KEY_FILE or RELAYER_PRIVATE_KEY_<chainId>)',
    },
    'worker started',
  );

  return {
    pool,
    mail,
    queues,
    workers,
    reminders,
    relayer,
    relayOutbox: relayLoop.relayNow,
    metrics,
    pdf,
    http,
    async close() {
      await relayLoop.stop();
      await relayerUpkeep?.stop();
      await outboxListener.close();
      await deliveriesListener.close();
      // The batches in flight finish (bounded by WEBHOOK_TIMEOUT_MS) and record their outcomes.
      await webhookLoop.stop();
      schedulers.stop();
      clearInterval(claimGuard);
      await http.close();
      // Worker.close() lets active jobs finish; the caller bounds the total time.
      await Promise.all(workers.map((w) => w.close()));
      await pdf?.close();
      await upkeep.stop();
      await Promise.all(allQueues(queues).map((q: AppQueue) => q.close()));
      await backend.close();
      await mail.close();
      await sender.close();
      await pool.end();
    },
  };
}

