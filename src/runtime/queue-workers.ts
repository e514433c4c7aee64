// One BullMQ Worker per queue of the catalogue, dispatching each job to the handler the
// entrypoint registered for its name. Per-queue settings (backoff types, the reminder repeat
// strategy, keep-policies) and the reminder schedule's after-job step live here.
import { Worker, type ConnectionOptions, type Job, type WorkerOptions } from 'bullmq';
import { retryDelayMs } from '../domain/webhooks.js';
import type { Logger } from '../log.js';
import { backoffSettings } from '../queue/backoff.js';
import { jobsOfQueue, QUEUES, type QueueRole, type ReminderJobData } from '../queue/catalogue.js';
import { createProcessor, plannedAtOfDelayed, type JobHandler, type JobObserver } from '../queue/dispatcher.js';
import type { JobContext, JobHandlers } from '../queue/job-context.js';
import { plannedInstantOf, reminderWorkerOptions } from '../queue/reminder-schedulers.js';
import type { ReminderService } from '../queue/reminder-service.js';

export interface QueueWorkerOptions {
  connection: ConnectionOptions;
  prefix: string;
  concurrency: number;
  lockDuration: number;
  stalledInterval: number;
  /** Webhook deliveries in flight at once (I/O bound: more than the email jobs). */
  webhookConcurrency: number;
}

export function startQueueWorkers(
  handlers: JobHandlers,
  ctx: JobContext,
  reminders: ReminderService,
  opts: QueueWorkerOptions,
  log: Logger,
  observer: JobObserver,
): Worker[] {
  const { webhookConcurrency, ...workerOpts } = opts;
  const common: WorkerOptions = { ...workerOpts, maxStalledCount: 5 };
  const perQueue: Record<QueueRole, Partial<WorkerOptions>> = {
    send: { settings: backoffSettings },
    reminders: { ...reminderWorkerOptions, settings: { ...reminderWorkerOptions.settings, ...backoffSettings } },
    // The delivery's own backoff (WEBHOOK_BACKOFF_BASE_MS doubling, capped); the fan-out's is
    // BullMQ's built-in exponential.
    webhooks: {
      concurrency: webhookConcurrency,
      settings: { backoffStrategy: (attemptsMade: number) => retryDelayMs(ctx.webhooks.retry, attemptsMade) },
    },
  };
  const handlersOf = (role: QueueRole): Record<string, JobHandler<never, JobContext>> =>
    Object.fromEntries(jobsOfQueue(QUEUES[role]).map((name) => [name, handlers[name] as JobHandler<never, JobContext>]));

  const sendWorker = new Worker(QUEUES.send, createProcessor(handlersOf('send'), ctx, log, plannedAtOfDelayed, observer), {
    ...common,
    ...perQueue.send,
  });

  const reminderProcessor = createProcessor(
    handlersOf('reminders'),
    ctx,
    log,
    (job) => (job.name === 'invoice.reminder' ? plannedInstantOf(job) : plannedAtOfDelayed(job)),
    observer,
  );
  const reminderWorker = new Worker(
    QUEUES.reminders,
    async (job: Job) => {
      try {
        return await reminderProcessor(job);
      } finally {
        // After the last slot of a phase the scheduler moves on or is removed (see
        // reminder-schedulers.ts), whatever this slot's outcome: a failed last slot must not
        // leave an exhausted scheduler behind.
        if (job.name === 'invoice.reminder') {
          await reminders.schedulers
            .advance(job as Job<ReminderJobData>, new Date())
            .catch((err) => log.warn({ err, job_id: job.id }, 'could not advance the reminder schedule'));
        }
      }
    },
    { ...common, ...perQueue.reminders },
  );
  const webhookWorker = new Worker(QUEUES.webhooks, createProcessor(handlersOf('webhooks'), ctx, log, plannedAtOfDelayed, observer), {
    ...common,
    ...perQueue.webhooks,
  });
  const workers = [sendWorker, reminderWorker, webhookWorker];
  for (const w of workers) w.on('error', (err) => log.warn({ err, queue: w.name }, 'worker error'));
  return workers;
}
