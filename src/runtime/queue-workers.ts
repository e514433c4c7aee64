// One BullMQ Worker per queue of the catalogue (one per reminder shard), dispatching each job to
// the handler the entrypoint registered for its name. Per-queue settings (backoff types, the
// reminder repeat strategy, keep-policies) live here; what a job does, in its handler.
import type { Logger } from '../log.js';
import type { AppWorker, QueueBackend, WorkerExtras } from '../queue/backend.js';
import { backoffSettings } from '../queue/backoff.js';
import { jobsOfQueue, QUEUES, type QueueRole } from '../queue/catalogue.js';
import { createProcessor, type JobHandler, type JobObserver } from '../queue/dispatcher.js';
import type { JobContext, JobHandlers } from '../queue/job-context.js';
import { reminderWorkerOptions } from '../queue/reminder-schedulers.js';
import { reminderShardQueue, reminderShardTag } from '../queue/reminder-shards.js';

export interface QueueWorkers {
  /** Every Worker started so far (grows when more reminder shards are consumed). */
  workers: AppWorker[];
  /** Starts Workers for reminder shards 0..count-1 not consumed yet. */
  consumeReminderShards(count: number): AppWorker[];
}

export interface QueueWorkerOptions {
  /** Builds the Workers on the process's queue backend (its connection, Redis's prefix and hash tags). */
  backend: QueueBackend;
  /** Webhook deliveries in flight at once (I/O bound: more than the email jobs). */
  webhookConcurrency: number;
  /** Chain scans in flight at once: one per watched chain (a chain's runs serialise on its cursor). */
  chainConcurrency: number;
  concurrency: number;
  lockDuration: number;
  stalledInterval: number;
}

export function startQueueWorkers(
  handlers: JobHandlers,
  ctx: JobContext,
  opts: QueueWorkerOptions,
  log: Logger,
  observer: JobObserver,
  reminderShards: number,
): QueueWorkers {
  const { backend, webhookConcurrency, chainConcurrency, ...workerOpts } = opts;
  const common: WorkerExtras = { ...workerOpts, maxStalledCount: 5 };
  const perQueue: Record<QueueRole, Partial<WorkerExtras>> = {
    send: { settings: backoffSettings },
    reminders: { ...reminderWorkerOptions, settings: { ...reminderWorkerOptions.settings, ...backoffSettings } },
    // The fan-out left from before deliveries went out in batches (its backoff is BullMQ's
    // built-in exponential) and the events prune; deliveries are not jobs (webhook-delivery-loop.ts).
    webhooks: { concurrency: webhookConcurrency },
    chain: { concurrency: chainConcurrency },
  };
  const handlersOf = (role: QueueRole): Record<string, JobHandler<never, JobContext>> =>
    Object.fromEntries(jobsOfQueue(QUEUES[role]).map((name) => [name, handlers[name] as JobHandler<never, JobContext>]));

  const processorOf = (role: QueueRole) => createProcessor(handlersOf(role), ctx, log, observer);
  const sendWorker = backend.worker(QUEUES.send, processorOf('send'), { ...common, ...perQueue.send });
  const processReminder = processorOf('reminders');
  // The shards share the process's concurrency: WORKER_CONCURRENCY is a budget per process and
  // role, not per shard (12 shards x 8 would outgrow the database pool).
  const shardConcurrency = (count: number) => Math.max(1, Math.ceil(opts.concurrency / count));
  const webhookWorker = backend.worker(QUEUES.webhooks, processorOf('webhooks'), { ...common, ...perQueue.webhooks });
  const chainWorker = backend.worker(QUEUES.chain, processorOf('chain'), { ...common, ...perQueue.chain });
  const workers: AppWorker[] = [sendWorker, webhookWorker, chainWorker];
  const consumed = new Set<number>();
  const watch = (w: AppWorker) => w.on('error', (err) => log.warn({ err, queue: w.name }, 'worker error'));
  for (const w of workers) watch(w);
  const consumeReminderShards = (count: number): AppWorker[] => {
    const started: AppWorker[] = [];
    for (let shard = 0; shard < count; shard++) {
      if (consumed.has(shard)) continue;
      consumed.add(shard);
      const w = backend.worker(
        reminderShardQueue(shard),
        processReminder,
        { ...common, concurrency: shardConcurrency(count), ...perQueue.reminders },
        reminderShardTag(shard),
      );
      watch(w);
      started.push(w);
    }
    workers.push(...started);
    return started;
  };
  consumeReminderShards(reminderShards);
  return { workers, consumeReminderShards };
}
