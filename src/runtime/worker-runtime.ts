// Wires a worker process: its pool, mail transport, queues and BullMQ workers, the outbox relay,
// the reminder machinery (stop notifications, reconciler). Several such processes may run on one
// Redis and one Postgres.
import { Queue, Worker, type Job } from 'bullmq';
import { Redis } from 'ioredis';
import type { FastifyInstance } from 'fastify';
import { createMetrics, type Metrics } from '../observability/metrics.js';
import { startWorkerHttp } from './worker-http.js';
import { reminderQueueHandlers, sendQueueHandlers } from '../../jobs/index.js';
import type { JobContext } from '../../jobs/context.js';
import { IDEMPOTENCY_PRUNE_EVERY_MS, IDEMPOTENCY_PRUNE_SCHEDULER_ID, JOB_IDEMPOTENCY_PRUNE } from '../../jobs/idempotency-prune.js';
import type { Config } from '../config.js';
import { listen } from '../db/listen.js';
import { createPool, type Pool } from '../db/pool.js';
import type { Logger } from '../log.js';
import { createMailTransport, type MailTransport } from '../mail/transport.js';
import { loadEmailTemplates } from '../mail/render-email.js';
import { createProcessor, plannedAtOfDelayed, type JobObserver } from '../queue/dispatcher.js';
import { REMINDER_QUEUE, SEND_QUEUE } from '../queue/names.js';
import { createOutboxRelay } from '../queue/outbox-relay.js';
import { redisOptions } from '../queue/redis.js';
import { backoffSettings } from '../queue/backoff.js';
import { REMINDER_JOB, plannedInstantOf, reminderSchedulerSettings, reminderWorkerOptions, type ReminderJobData } from '../queue/reminder-schedulers.js';
import { createReminderService, JOB_RECONCILE, RECONCILE_SCHEDULER_ID, type ReminderService } from '../queue/reminder-service.js';

export interface WorkerRuntime {
  pool: Pool;
  mail: MailTransport;
  queues: { send: Queue; reminders: Queue };
  workers: Worker[];
  reminders: ReminderService;
  metrics: Metrics;
  /** The worker's health and metrics port. */
  http: FastifyInstance;
  /** Runs the outbox relay once now (also runs on its timer). */
  relayOutbox(): Promise<number>;
  close(): Promise<void>;
}

export interface WorkerRuntimeOptions {
  observer?: JobObserver;
  /** A transport to use instead of the configured one. */
  mail?: MailTransport;
}

export const REMINDER_CHANNEL = 'invoice_reminders_stop';

export async function createWorkerRuntime(config: Config, log: Logger, opts: WorkerRuntimeOptions = {}): Promise<WorkerRuntime> {
  // Compile the email templates now: a missing or broken one fails the start, not a send.
  loadEmailTemplates();
  const pool = createPool(config.databaseUrl, config.workerConcurrency * 2 + 5);
  const mail = opts.mail ?? createMailTransport({ smtpUrl: config.smtpUrl, poolSize: config.smtpPoolSize, outboxDir: config.outboxDir });
  const connection = redisOptions(config.redisUrl);
  const send = new Queue(SEND_QUEUE, { connection, prefix: config.redisPrefix });
  const reminderQueue = new Queue(REMINDER_QUEUE, { connection, prefix: config.redisPrefix, settings: reminderSchedulerSettings });
  const redis = new Redis({ ...connection, maxRetriesPerRequest: null });
  for (const emitter of [send, reminderQueue, redis]) emitter.on('error', (err: Error) => log.warn({ err }, 'redis connection error'));

  const reminders = createReminderService(pool, reminderQueue, redis, config.reminders);
  const metrics = createMetrics({ queues: [send, reminderQueue], db: pool });
  // The health port first: a start that cannot bind it (WORKER_PORT taken) ends before this
  // process takes a single job.
  let http: FastifyInstance;
  let httpPort: number;
  try {
    ({ app: http, port: httpPort } = await startWorkerHttp(
      { listen: { port: config.workerPort, host: config.host, variable: 'WORKER_PORT', fallbackToAny: config.workerPortFallback }, db: pool, redis, metrics },
      log,
    ));
  } catch (err) {
    await Promise.all([send.close(), reminderQueue.close()]).catch(() => undefined);
    redis.disconnect();
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
  const ctx: JobContext = {
    config,
    pool,
    mail,
    reminders,
    countEmail: (kind, outcome) => metrics.emails.inc({ kind, outcome }),
    observeReminderLateness: (seconds) => metrics.reminderLateness.observe(seconds),
  };
  const common = {
    connection,
    prefix: config.redisPrefix,
    concurrency: config.workerConcurrency,
    lockDuration: config.workerLockDurationMs,
    stalledInterval: config.workerStalledIntervalMs,
    maxStalledCount: 5,
  };
  const sendWorker = new Worker(SEND_QUEUE, createProcessor(sendQueueHandlers, ctx, log, plannedAtOfDelayed, observer), {
    ...common,
    settings: backoffSettings,
  });

  const reminderProcessor = createProcessor(
    reminderQueueHandlers,
    ctx,
    log,
    (job) => (job.name === REMINDER_JOB ? plannedInstantOf(job) : plannedAtOfDelayed(job)),
    observer,
  );
  const reminderWorker = new Worker(
    REMINDER_QUEUE,
    async (job: Job) => {
      try {
        return await reminderProcessor(job);
      } finally {
        // After the last slot of a phase the scheduler moves on or is removed (see
        // reminder-schedulers.ts), whatever this slot's outcome: a failed last slot must not
        // leave an exhausted scheduler behind.
        if (job.name === REMINDER_JOB) {
          await reminders.schedulers.advance(job as Job<ReminderJobData>, new Date()).catch((err) => log.warn({ err, job_id: job.id }, 'could not advance the reminder schedule'));
        }
      }
    },
    { ...common, ...reminderWorkerOptions, settings: { ...reminderWorkerOptions.settings, ...backoffSettings } },
  );
  const workers = [sendWorker, reminderWorker];
  for (const w of workers) w.on('error', (err) => log.warn({ err, queue: w.name }, 'worker error'));

  // Paid, void or reminders off, by whatever path: remove the schedulers within a second.
  const stopListener = listen(
    config.databaseUrl,
    REMINDER_CHANNEL,
    (invoiceId) => {
      reminders.stop(invoiceId).then(
        () => log.info({ invoice_id: invoiceId }, 'reminders stopped'),
        (err) => log.warn({ err, invoice_id: invoiceId }, 'could not stop reminders now; the job re-check and reconciler will'),
      );
    },
    log,
  );

  // The reconciler runs on its own scheduler (one per queue, whatever the number of workers),
  // and once at start: a worker that starts after a Redis loss repairs it straight away.
  const reconcileEveryMs = config.reconcileEvery.toMillis();
  const upsertReconciler = () =>
    reminderQueue.upsertJobScheduler(
      RECONCILE_SCHEDULER_ID,
      { every: reconcileEveryMs },
      { name: JOB_RECONCILE, data: {}, opts: { removeOnComplete: 50, removeOnFail: 50 } },
    );
  await upsertReconciler().catch((err) => log.warn({ err }, 'could not set up the reconciler scheduler; will retry'));
  // Expired Idempotency-Key records are deleted on a scheduler of their own (an upsert: one
  // scheduler however many workers start), guarded below like the reconciler's.
  const upsertPruner = () =>
    reminderQueue.upsertJobScheduler(
      IDEMPOTENCY_PRUNE_SCHEDULER_ID,
      { every: IDEMPOTENCY_PRUNE_EVERY_MS },
      { name: JOB_IDEMPOTENCY_PRUNE, data: {}, opts: { removeOnComplete: 24, removeOnFail: 24 } },
    );
  await upsertPruner().catch((err) => log.warn({ err }, 'could not set up the idempotency prune scheduler; will retry'));
  // A Redis loss takes the reconciler's own scheduler with it: put it back, or nothing would
  // ever repair Redis until a worker restarts.
  const reconcilerGuard = setInterval(() => {
    reminderQueue
      .getJobScheduler(RECONCILE_SCHEDULER_ID)
      .then((found) => (found ? undefined : upsertReconciler().then(() => log.warn('reconciler scheduler was missing from Redis; re-created'))))
      .catch((err) => log.warn({ err }, 'could not check the reconciler scheduler; will retry'));
    reminderQueue
      .getJobScheduler(IDEMPOTENCY_PRUNE_SCHEDULER_ID)
      .then((found) => (found ? undefined : upsertPruner().then(() => log.warn('idempotency prune scheduler was missing from Redis; re-created'))))
      .catch((err) => log.warn({ err }, 'could not check the idempotency prune scheduler; will retry'));
  }, reconcileEveryMs);
  reconcilerGuard.unref();
  reminders.reconcile().then(
    (report) => log.info({ ...report }, 'reminders reconciled at start'),
    (err) => log.warn({ err }, 'reconcile at start failed'),
  );

  const relay = createOutboxRelay(pool, { send });
  let relaying: Promise<number> | null = null;
  const relayOutbox = async (): Promise<number> => {
    // One relay pass at a time per process; drain in batches until nothing is pending.
    if (relaying) return relaying;
    relaying = (async () => {
      let total = 0;
      for (;;) {
        const n = await relay.relay();
        total += n;
        if (n === 0) return total;
      }
    })().finally(() => {
      relaying = null;
    });
    return relaying;
  };
  const timer = setInterval(() => {
    relayOutbox().then(
      (n) => n > 0 && log.info({ handed_over: n }, 'outbox relay handed jobs to the queue'),
      (err) => log.warn({ err }, 'outbox relay failed; will retry'),
    );
  }, config.outboxRelayIntervalMs);
  timer.unref();

  log.info(
    {
      concurrency: config.workerConcurrency,
      mail: config.smtpUrl ? 'smtp' : `files in ${config.outboxDir}`,
      port: httpPort,
    },
    'worker started',
  );

  return {
    pool,
    mail,
    queues: { send, reminders: reminderQueue },
    workers,
    reminders,
    relayOutbox,
    metrics,
    http,
    async close() {
      clearInterval(timer);
      clearInterval(reconcilerGuard);
      await http.close();
      // Worker.close() lets active jobs finish; the caller bounds the total time.
      await Promise.all(workers.map((w) => w.close()));
      await stopListener.close();
      await relaying?.catch(() => undefined);
      await Promise.all([send.close(), reminderQueue.close()]);
      redis.disconnect();
      await mail.close();
      await pool.end();
    },
  };
}
