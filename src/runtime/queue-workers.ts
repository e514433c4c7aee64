// One BullMQ Worker per queue of the catalogue, dispatching each job to the handler the
// entrypoint registered for its name. Per-queue settings (backoff types, the reminder repeat
// strategy, keep-policies) and the reminder schedule's after-job step live here.
import type { Job } from 'bullmq';
import { retryDelayMs } from '../domain/webhooks.js';
import type { Logger } from '../log.js';
import type { AppWorker, QueueBackend, WorkerExtras } from '../queue/backend.js';
import { backoffSettings } from '../queue/backoff.js';
import { jobsOfQueue, QUEUES, type QueueRole, type ReminderJobData } from '../queue/catalogue.js';
import { createProcessor, plannedAtOfDelayed, type JobHandler, type JobObserver } from '../queue/dispatcher.js';
import type { JobContext, JobHandlers } from '../queue/job-context.js';
import { plannedInstantOf, reminderWorkerOptions } from '../queue/reminder-schedulers.js';
import type { ReminderService } from '../queue/reminder-service.js';

export interface QueueWorkerOptions {
  /** Builds the Workers on the process's queue backend (its connection, Redis's prefix). */
  backend: QueueBackend;
  /** Webhook deliveries in flight at once (I/O bound: more than the email jobs). */
  webhookConcurrency: number;
  concurrency: number;
  lockDuration: number;
  stalledInterval: number;
}

export function startQueueWorkers(
  handlers: JobHandlers,
  ctx: JobContext,
  reminders: ReminderService,
  opts: QueueWorkerOptions,
  log: Logger,
  observer: JobObserver,
): AppWorker[] {
  const { backend, webhookConcurrency, ...workerOpts } = opts;
  const common: WorkerExtras = { ...workerOpts, maxStalledCount: 5 };
  const perQueue: Record<QueueRole, Partial<WorkerExtras>> = {
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

  const sendWorker = backend.worker(QUEUES.send, createProcessor(handlersOf('send'), ctx, log, plannedAtOfDelayed, observer), {
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
  const reminderWorker = backend.worker(
    QUEUES.reminders,
    async (job: Job) => {
      // A slot planned under another reminder policy (this worker started with other REMINDERS_*
      // values and its start's reconcile has not reached this invoice yet) is not sent: the
      // invoice moves to this worker's policy, future slots only, as the reconcile would.
      if (job.name === 'invoice.reminder' && !reminders.schedulers.plannedUnderPolicy(job)) {
        const { invoiceId } = job.data as ReminderJobData;
        await reminders.resume(invoiceId);
        log.info({ job_id: job.id, invoice_id: invoiceId }, 'reminder planned under another policy: re-planned, not sent');
        return 'replanned';
      }
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
  const webhookWorker = backend.worker(QUEUES.webhooks, createProcessor(handlersOf('webhooks'), ctx, log, plannedAtOfDelayed, observer), {
    ...common,
    ...perQueue.webhooks,
  });
  const workers = [sendWorker, reminderWorker, webhookWorker];
  for (const w of workers) w.on('error', (err) => log.warn({ err, queue: w.name }, 'worker error'));
  return workers;
}
