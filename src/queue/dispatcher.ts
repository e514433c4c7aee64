// Adapts BullMQ jobs to the handlers in jobs/: a handler gets its payload and a context, never a
// BullMQ object. A PermanentJobError becomes BullMQ's UnrecoverableError (no more attempts);
// anything else is rethrown so BullMQ retries it with backoff. One log line per outcome.
import { UnrecoverableError, type Job, type Processor } from 'bullmq';
import { PermanentJobError } from '../errors.js';
import type { Logger } from '../log.js';
import { JOBS, isJobName } from './catalogue.js';

export interface JobMeta {
  jobId: string;
  /** 1 on the first run. */
  attempt: number;
  /** The instant the job was planned for: when it was added plus its delay (a scheduler's job: see `source`). */
  plannedAt: Date;
  /**
   * Where the job came from: its queue, and its options (a scheduler-made job carries its repeat
   * options there). For a handler that keeps its own schedule in step (the reminder job).
   */
  source: { queueName: string; opts: object };
}

export type JobHandler<P, C> = (payload: P, ctx: C & { log: Logger }, meta: JobMeta) => Promise<string>;

export interface JobObserver {
  /** Called once per run with its outcome, for metrics. */
  onOutcome?(name: string, outcome: 'completed' | 'failed' | 'permanent_failure', durationMs: number): void;
}

export function createProcessor<C>(
  handlers: Record<string, JobHandler<never, C>>,
  ctx: C,
  log: Logger,
  observer: JobObserver = {},
): Processor {
  return async (job: Job) => {
    const handler = handlers[job.name] as JobHandler<unknown, C> | undefined;
    const data = (job.data ?? {}) as { invoiceId?: string };
    const jobLog = log.child({ job_id: job.id, job_name: job.name, ...(data.invoiceId ? { invoice_id: data.invoiceId } : {}) });
    if (!handler) throw new UnrecoverableError(`no handler for job ${job.name}`);
    const started = performance.now();
    const meta: JobMeta = {
      jobId: job.id ?? '',
      attempt: job.attemptsMade + 1,
      plannedAt: plannedAtOfDelayed(job),
      source: { queueName: job.queueName, opts: job.opts },
    };
    try {
      const outcome = await handler(job.data, { ...ctx, log: jobLog }, meta);
      const durationMs = performance.now() - started;
      observer.onOutcome?.(job.name, 'completed', durationMs);
      const level = isJobName(job.name) ? (JOBS[job.name].completedLogLevel ?? 'info') : 'info';
      jobLog[level]({ duration_ms: Math.round(durationMs), outcome, attempt: meta.attempt }, 'job completed');
      return outcome;
    } catch (err) {
      const durationMs = performance.now() - started;
      if (err instanceof PermanentJobError) {
        observer.onOutcome?.(job.name, 'permanent_failure', durationMs);
        jobLog.error({ err, duration_ms: Math.round(durationMs), attempt: meta.attempt }, 'job failed permanently');
        throw new UnrecoverableError(err.message);
      }
      observer.onOutcome?.(job.name, 'failed', durationMs);
      jobLog.warn({ err, duration_ms: Math.round(durationMs), attempt: meta.attempt }, 'job failed; BullMQ will retry');
      throw err;
    }
  };
}

/** A plain job's planned instant: when it was added plus its delay. */
export function plannedAtOfDelayed(job: Job): Date {
  return new Date(job.timestamp + (job.opts.delay ?? 0));
}
