// The job registry: job name -> handler, per queue. The worker runtime dispatches through it.
import { JOB_INVOICE_SEND } from '../src/queue/names.js';
import type { JobHandler } from '../src/queue/dispatcher.js';
import { JOB_INVOICE_DUE, JOB_RECONCILE } from '../src/queue/reminder-service.js';
import { REMINDER_JOB } from '../src/queue/reminder-schedulers.js';
import type { JobContext } from './context.js';
import { idempotencyPrune, JOB_IDEMPOTENCY_PRUNE } from './idempotency-prune.js';
import { invoiceDue } from './invoice-due.js';
import { invoiceReminder } from './invoice-reminder.js';
import { invoiceSend } from './invoice-send.js';
import { remindersReconcile } from './reminders-reconcile.js';

type Handlers = Record<string, JobHandler<never, JobContext>>;

export const sendQueueHandlers: Handlers = {
  [JOB_INVOICE_SEND]: invoiceSend,
};

export const reminderQueueHandlers: Handlers = {
  [REMINDER_JOB]: invoiceReminder,
  [JOB_INVOICE_DUE]: invoiceDue,
  [JOB_RECONCILE]: remindersReconcile,
  [JOB_IDEMPOTENCY_PRUNE]: idempotencyPrune,
};
