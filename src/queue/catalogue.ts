// The job catalogue: every queue, every job name, the payload each job carries, its default
// options and its id. Producers (the outbox, the reminder service and schedulers), the worker
// (which queue a handler listens on), the dashboard and the metrics all read this module; a new
// job kind is one entry here plus its handler in jobs/ (see ARCHITECTURE.md).
import type { JobsOptions } from 'bullmq';
import type { Config } from '../config.js';
import { isWatched } from '../domain/chains.js';
import type { DeliveryKind } from '../domain/delivery-kinds.js';
import type { ReminderPhase } from '../domain/reminder-schedule.js';
import { CAPPED_BACKOFF } from './backoff.js';

/** Every BullMQ queue, by role. The names are Redis keys: never rename one that holds jobs. */
export const QUEUES = {
  send: 'invoice-send',
  reminders: 'invoice-reminders',
  webhooks: 'webhooks',
  chain: 'chain-watch',
} as const;
export type QueueRole = keyof typeof QUEUES;
export type QueueName = (typeof QUEUES)[QueueRole];
export const ALL_QUEUES: readonly QueueName[] = Object.values(QUEUES);

export interface InvoiceSendPayload {
  invoiceId: string;
  deliveryId: string;
}

/** The "payment received" email with its receipt PDF; the row comes from a database trigger. */
export interface InvoiceReceiptPayload {
  invoiceId: string;
  deliveryId: string;
}

/** The receipts owed by many invoices turned paid by one statement (a fan-out row, migration 1700000003100). */
export interface InvoiceReceiptsPayload {
  batchId: string;
  invoiceIds: string[];
}

/** The acknowledgement of one partial payment; the row comes from a database trigger (migration 1700000001750). */
export interface InvoicePartialPaymentPayload {
  invoiceId: string;
  deliveryId: string;
  paymentId: string;
  /** What remained to pay once the payment was applied (atomic units). */
  remainingAtomic: string;
}

export interface InvoiceDuePayload {
  invoiceId: string;
}

export interface ReminderJobData {
  invoiceId: string;
  phase: ReminderPhase;
}

/** An event to fan out to the webhook endpoints that want it. */
export interface WebhookFanoutPayload {
  eventId: string;
}

/** One event to one endpoint. */
export interface WebhookDeliverPayload {
  eventId: string;
  endpointId: string;
}

/** One scan of a watched chain for payments (src/chain/watcher.ts). */
export interface ChainWatchPayload {
  chainId: number;
}

/** The email of one failed charge attempt on a subscription's period invoice (jobs/subscriptions-charge.ts writes it). */
export interface InvoicePaymentFailedPayload {
  invoiceId: string;
  deliveryId: string;
  /** The attempt's number (the invoice's attempt_count after it). */
  attempt: number;
  failureCode: string;
  failureMessage: string;
  /** When the next attempt happens (ISO); null: that was the last. */
  nextAttemptAt: string | null;
  /** After the last attempt: what became of the subscription (DUNNING_FINAL_ACTION). */
  finalAction: 'cancel' | 'keep' | null;
}

/** Backoff type of webhook deliveries: WEBHOOK_BACKOFF_BASE_MS doubling, capped (domain/webhooks.ts). */
export const WEBHOOK_BACKOFF = 'webhook-backoff';

/** Job name -> payload. Producer and handler both type their side from this map. */
export interface JobPayloads {
  'invoice.send': InvoiceSendPayload;
  'invoice.receipt': InvoiceReceiptPayload;
  'invoice.receipts': InvoiceReceiptsPayload;
  'invoice.partial_payment': InvoicePartialPaymentPayload;
  'invoice.due': InvoiceDuePayload;
  'invoice.reminder': ReminderJobData;
  'reminders.reconcile': Record<string, never>;
  'idempotency.prune': Record<string, never>;
  'webhook.fanout': WebhookFanoutPayload;
  'webhook.deliver': WebhookDeliverPayload;
  'events.prune': Record<string, never>;
  'checkouts.expire': Record<string, never>;
  'chain.watch': ChainWatchPayload;
  'invoice.payment_failed': InvoicePaymentFailedPayload;
  'subscriptions.charge': Record<string, never>;
  'subscriptions.cancel': Record<string, never>;
}
export type JobName = keyof JobPayloads;

export interface JobSpec<N extends JobName> {
  queue: QueueName;
  /** Options every add of this job uses (a job scheduler's template for scheduler-made jobs). */
  options: JobsOptions;
  /**
   * The job's BullMQ id, derived from its payload so that adding the same job twice (the outbox
   * relay and the fast path, a re-run) is a no-op. BullMQ ids must not contain ':'.
   */
  jobId?(payload: JobPayloads[N]): string;
  /**
   * How the job reaches its queue: written to the outbox (enqueueInTransaction refuses any other
   * job), added by another job's handler, added with a delay, or made by a job scheduler (each
   * invoice's reminder scheduler, or the upkeep `schedule` below).
   */
  producedBy: 'outbox' | 'handler' | 'delayed' | 'scheduler';
  /**
   * An upkeep job on job schedulers of its own: the worker runtime upserts (and guards) one
   * scheduler per instance, on the job's queue (reminder shard 0 for the reminder role).
   */
  schedule?: JobSchedule<N>;
  /**
   * The level of the "job completed" line; a job that runs every few seconds (chain.watch) logs it
   * at debug so the info log says what changed, not that a poll happened.
   */
  completedLogLevel?: 'info' | 'debug';
}

/** One job scheduler of an upkeep job: its id, its payload, and its name in the log lines. */
export interface ScheduledInstance<N extends JobName> {
  id: string;
  data: JobPayloads[N];
  what: string;
}

export interface JobSchedule<N extends JobName> {
  /** The period between two runs. */
  everyMs(config: Config): number;
  /** The schedulers this configuration wants: one, or one per watched chain. */
  instances(config: Config): ScheduledInstance<N>[];
  /** Schedulers with this id prefix that `instances` does not name are removed at start. */
  removeOthersWithPrefix?: string;
}

/** How often expired Idempotency-Key records are deleted. */
export const IDEMPOTENCY_PRUNE_EVERY_MS = 3_600_000;

/** Scheduler ids (BullMQ job schedulers): the upkeep jobs', and the prefixes of the per-invoice and per-chain ones. */
export const SCHEDULERS = {
  reconcile: 'reminders-reconcile',
  idempotencyPrune: 'idempotency-prune',
  eventsPrune: 'events-prune',
  checkoutsExpire: 'checkouts-expire',
  subscriptionsCharge: 'subscriptions-charge',
  subscriptionsCancel: 'subscriptions-cancel',
  reminderPrefix: 'rem-',
  chainWatchPrefix: 'chain-watch-',
} as const;

/** The job scheduler of one watched chain. */
export function chainWatchSchedulerId(chainId: number): string {
  return `${SCHEDULERS.chainWatchPrefix}${chainId}`;
}

/** A single upkeep scheduler with an empty payload. */
const single =
  (id: string, what: string) =>
  (): { id: string; data: Record<string, never>; what: string }[] => [{ id, data: {}, what }];

const DAY_S = 24 * 3600;

/** How many times an email's job is tried (about 16 hours with its back-off). */
export const EMAIL_JOB_ATTEMPTS = 100;

/**
 * The job that emails each kind of delivery written with its outbox row (its job id
 * `<job>-<invoice>-<delivery>`, below); reminders are sent by their schedulers' jobs instead.
 */
export const EMAIL_JOB_OF_DELIVERY = {
  invoice: 'invoice.send',
  receipt: 'invoice.receipt',
  partial_payment: 'invoice.partial_payment',
  payment_failed: 'invoice.payment_failed',
} as const satisfies Partial<Record<DeliveryKind, JobName>>;

/**
 * Retry policy of a job that emails a document (an invoice, a receipt): one place for both. The
 * counts in keep policies bound Redis's memory; the Postgres backend keeps by age alone
 * (postgresJobOptions in backend.ts).
 */
const EMAIL_JOB_OPTIONS = {
  attempts: EMAIL_JOB_ATTEMPTS,
  backoff: { type: CAPPED_BACKOFF },
  removeOnComplete: { age: DAY_S, count: 50_000 },
  removeOnFail: { age: 14 * DAY_S },
};

export const JOBS: { readonly [N in JobName]: JobSpec<N> } = {
  // Renders the invoice PDF and emails it. Transient failures are retried, backing off up to
  // 10 min between attempts (about 16 hours in all); permanent ones fail at once.
  'invoice.send': {
    queue: QUEUES.send,
    producedBy: 'outbox',
    options: EMAIL_JOB_OPTIONS,
    jobId: (p) => `invoice.send-${p.invoiceId}-${p.deliveryId}`,
  },
  // Emails the receipt of a paid invoice. Its outbox row is written by a database trigger in the
  // transaction that marks the invoice paid (migration 1700000001201), whatever path did it; the
  // job id there is this one. Retried like a send.
  'invoice.receipt': {
    queue: QUEUES.send,
    producedBy: 'outbox',
    options: EMAIL_JOB_OPTIONS,
    jobId: (p) => `invoice.receipt-${p.invoiceId}-${p.deliveryId}`,
  },
  // Owes the receipts of up to 500 invoices that one statement turned paid (a range of the payment
  // detector): each one's delivery and `invoice.receipt` outbox row. Its outbox row is written by
  // the same trigger, in the same transaction, when a statement pays more than 100 invoices
  // (migration 1700000003100); running it again owes nothing twice. It deletes the row with the
  // work; a row left (this job lost or out of attempts) is owed by reminders.reconcile.
  'invoice.receipts': {
    queue: QUEUES.send,
    producedBy: 'outbox',
    options: EMAIL_JOB_OPTIONS,
    jobId: (p) => `invoice.receipts-${p.batchId}`,
  },
  // Emails the acknowledgement of a partial payment (what arrived, what remains, the link). Its
  // outbox row is written by a database trigger at the commit that applied the payment (migration
  // 1700000001750), one per payment; the job id there is this one. Retried like a send.
  'invoice.partial_payment': {
    queue: QUEUES.send,
    producedBy: 'outbox',
    options: EMAIL_JOB_OPTIONS,
    jobId: (p) => `invoice.partial_payment-${p.invoiceId}-${p.deliveryId}`,
  },
  // Delayed to the invoice's due date: open -> overdue, reminders move to the after phase.
  'invoice.due': {
    queue: QUEUES.reminders,
    producedBy: 'delayed',
    options: {
      attempts: 10,
      backoff: { type: 'exponential', delay: 1_000 },
      removeOnComplete: { age: DAY_S },
      removeOnFail: { age: 14 * DAY_S },
    },
    // Its id is dueJobId(invoiceId, dueAt), below: not from the payload alone.
  },
  // Made by the invoice's job scheduler (reminder-schedulers.ts) at each planned slot. A
  // transient SMTP failure is retried (backing off up to 10 min, about 4 hours in all) rather than
  // losing the slot; the handler dedups by slot. Keep-policies are on the Worker
  // (reminderWorkerOptions): template options are stored once per scheduled invoice in Redis.
  'invoice.reminder': {
    queue: QUEUES.reminders,
    producedBy: 'scheduler',
    options: { attempts: 30, backoff: { type: CAPPED_BACKOFF } },
  },
  // Made by its own job scheduler every RECONCILE_EVERY (and once at worker start): makes Redis
  // match Postgres, owes the receipts of `invoice.receipts` rows whose job never ran to the end, and
  // hands over again the jobs of emails owed whose delivery has not moved for 30 minutes.
  'reminders.reconcile': {
    queue: QUEUES.reminders,
    producedBy: 'scheduler',
    options: { removeOnComplete: 50, removeOnFail: 50 },
    schedule: { everyMs: (config) => config.reconcileEvery.toMillis(), instances: single(SCHEDULERS.reconcile, 'reconciler') },
  },
  // Made by its own job scheduler every IDEMPOTENCY_PRUNE_EVERY_MS: deletes expired
  // Idempotency-Key records. On the reminder queue, whose workers every process runs.
  'idempotency.prune': {
    queue: QUEUES.reminders,
    producedBy: 'scheduler',
    options: { removeOnComplete: 24, removeOnFail: 24 },
    schedule: { everyMs: () => IDEMPOTENCY_PRUNE_EVERY_MS, instances: single(SCHEDULERS.idempotencyPrune, 'idempotency prune') },
  },
  // One per event, from the outbox row that emit_event wrote with the event before migration
  // 1700000001800 (emit_event now writes the deliveries itself, and the workers' delivery loop
  // sends them in batches). Kept for rows and jobs left at an upgrade: creates the deliveries.
  'webhook.fanout': {
    queue: QUEUES.webhooks,
    producedBy: 'outbox',
    options: {
      attempts: 50,
      backoff: { type: 'exponential', delay: 1_000 },
      removeOnComplete: { age: DAY_S, count: 100_000 },
      removeOnFail: { age: 14 * DAY_S },
    },
    jobId: (p) => `webhook.fanout-${p.eventId}`,
  },
  // One per (event, endpoint), added by the fan-out before deliveries went out in batches
  // (src/webhooks/deliver-batch.ts): no longer produced. A job left at an upgrade only wakes the
  // delivery loop; its pending row is sent from there.
  'webhook.deliver': {
    queue: QUEUES.webhooks,
    producedBy: 'handler',
    options: {
      attempts: 10_000,
      backoff: { type: WEBHOOK_BACKOFF },
      removeOnComplete: { age: DAY_S, count: 100_000 },
      removeOnFail: { age: 14 * DAY_S },
    },
    jobId: (p) => `webhook.deliver-${p.eventId}-${p.endpointId}`,
  },
  // Made by its own job scheduler every EVENTS_PRUNE_EVERY: deletes events past their retention.
  'events.prune': {
    queue: QUEUES.webhooks,
    producedBy: 'scheduler',
    options: { removeOnComplete: 24, removeOnFail: 24 },
    schedule: { everyMs: (config) => config.events.pruneEvery.toMillis(), instances: single(SCHEDULERS.eventsPrune, 'events prune') },
  },
  // Made by its own job scheduler every CHECKOUT_EXPIRE_EVERY: voids payment-link checkouts past
  // CHECKOUT_EXPIRY that nobody paid. On the reminder queue, whose workers every process runs.
  'checkouts.expire': {
    queue: QUEUES.reminders,
    producedBy: 'scheduler',
    options: { removeOnComplete: 24, removeOnFail: 24 },
    schedule: { everyMs: (config) => config.checkouts.expireEvery.toMillis(), instances: single(SCHEDULERS.checkoutsExpire, 'checkouts expire') },
  },
  // Made by one job scheduler per watched chain every CHAIN_POLL_INTERVAL_MS, on a queue of its
  // own so a slow RPC never holds a send or a webhook. An RPC failure ends a run quietly (the
  // watcher backs off between runs by itself); anything else (a database error, a bug) fails it,
  // logged with its stack and counted, and the next tick is its retry: no attempts of its own.
  'chain.watch': {
    queue: QUEUES.chain,
    producedBy: 'scheduler',
    completedLogLevel: 'debug',
    options: { attempts: 1, removeOnComplete: 100, removeOnFail: 100 },
    schedule: {
      everyMs: (config) => config.chainPollIntervalMs,
      instances: (config) =>
        config.chains.filter(isWatched).map((c) => ({ id: chainWatchSchedulerId(c.chainId), data: { chainId: c.chainId }, what: `chain ${c.chainId} watch` })),
      // A chain no longer watched loses its scheduler.
      removeOthersWithPrefix: SCHEDULERS.chainWatchPrefix,
    },
  },
  // Emails the customer that a period's charge failed (what, by how much, the next attempt, the
  // link to the period invoice's page). Its delivery and outbox row are written with the failed
  // attempt, in its transaction (jobs/subscriptions-charge.ts): one per attempt. Retried like a send.
  'invoice.payment_failed': {
    queue: QUEUES.send,
    producedBy: 'outbox',
    options: EMAIL_JOB_OPTIONS,
    jobId: (p) => `invoice.payment_failed-${p.invoiceId}-${p.deliveryId}`,
  },
  // Made by its own job scheduler every SUBSCRIPTION_POLL_INTERVAL_MS: claims the subscriptions
  // whose next_work_at has come in Postgres (FOR UPDATE SKIP LOCKED, then a lease), makes the
  // period's invoice, simulates and sends its charge through the relayer, counts failed attempts
  // (dunning) and ends subscriptions past ends_at. Postgres is the truth: a lost queue store loses
  // nothing (the guarded scheduler is put back and the rows are still due). On the chain queue, beside
  // the watch whose Charged logs pay the invoices; each tick is its retry.
  'subscriptions.charge': {
    queue: QUEUES.chain,
    producedBy: 'scheduler',
    completedLogLevel: 'debug',
    options: { attempts: 1, removeOnComplete: 100, removeOnFail: 100 },
    schedule: { everyMs: (config) => config.subscriptions.pollIntervalMs, instances: single(SCHEDULERS.subscriptionsCharge, 'subscription charges') },
  },
  // Made by its own job scheduler every SUBSCRIPTION_POLL_INTERVAL_MS: sends the on-chain cancel
  // of subscriptions the merchant (API) or dunning canceled, claimed as the charges are.
  'subscriptions.cancel': {
    queue: QUEUES.chain,
    producedBy: 'scheduler',
    completedLogLevel: 'debug',
    options: { attempts: 1, removeOnComplete: 100, removeOnFail: 100 },
    schedule: { everyMs: (config) => config.subscriptions.pollIntervalMs, instances: single(SCHEDULERS.subscriptionsCancel, 'subscription cancels') },
  },
};

export const JOB_NAMES = Object.keys(JOBS) as JobName[];

/** The job names whose handlers listen on `queue`. */
export function jobsOfQueue(queue: QueueName): JobName[] {
  return JOB_NAMES.filter((n) => JOBS[n].queue === queue);
}

export function isJobName(name: string): name is JobName {
  return Object.hasOwn(JOBS, name);
}

/** The id the catalogue gives this job; throws for a job kind without one. */
export function jobIdOf<N extends JobName>(name: N, payload: JobPayloads[N]): string {
  const spec: JobSpec<N> = JOBS[name];
  if (!spec.jobId) throw new Error(`job ${name} has no catalogue id; pass one`);
  return spec.jobId(payload);
}

/** The due-date job's id names the due instant too: the reconciler checks for exactly this job. */
export function dueJobId(invoiceId: string, dueAt: Date): string {
  return `invoice.due-${invoiceId}-${dueAt.getTime()}`;
}

/** The upkeep jobs: those with a `schedule`. */
export const SCHEDULED_JOBS: JobName[] = JOB_NAMES.filter((n) => JOBS[n].schedule !== undefined);

/**
 * A job as a queue's add()/addBulk() takes it: the catalogue's options, its id (the catalogue's
 * unless given), any extra options (a delay).
 */
export function jobToAdd<N extends JobName>(
  name: N,
  data: JobPayloads[N],
  extra: JobsOptions & { jobId?: string } = {},
): { name: N; data: JobPayloads[N]; opts: JobsOptions } {
  return { name, data, opts: { ...JOBS[name].options, jobId: extra.jobId ?? jobIdOf(name, data), ...extra } };
}

/** The due-date job of an invoice: delayed to its due instant. */
export function dueJob(invoiceId: string, dueAt: Date, now: number = Date.now()): ReturnType<typeof jobToAdd<'invoice.due'>> {
  return jobToAdd('invoice.due', { invoiceId }, { jobId: dueJobId(invoiceId, dueAt), delay: Math.max(0, dueAt.getTime() - now) });
}
