// The handler registry: one handler per job of the catalogue (src/queue/catalogue.ts says which
// queue each listens on). The entrypoints hand it to the worker runtime.
import type { JobHandlers } from '../src/queue/job-context.js';
import { idempotencyPrune } from './idempotency-prune.js';
import { invoiceDue } from './invoice-due.js';
import { invoicePartialPayment } from './invoice-partial-payment.js';
import { invoiceReceipt } from './invoice-receipt.js';
import { invoiceReceipts } from './invoice-receipts.js';
import { invoiceReminder } from './invoice-reminder.js';
import { invoiceSend } from './invoice-send.js';
import { remindersReconcile } from './reminders-reconcile.js';
import { eventsPrune } from './events-prune.js';
import { webhookDeliver } from './webhook-deliver.js';
import { webhookFanout } from './webhook-fanout.js';
import { chainWatch } from './chain-watch.js';
import { checkoutsExpire } from './checkouts-expire.js';
import { invoicePaymentFailed } from './invoice-payment-failed.js';
import { subscriptionsCancel } from './subscriptions-cancel.js';
import { subscriptionsCharge } from './subscriptions-charge.js';

export const jobHandlers: JobHandlers = {
  'invoice.send': invoiceSend,
  'invoice.receipt': invoiceReceipt,
  'invoice.receipts': invoiceReceipts,
  'invoice.partial_payment': invoicePartialPayment,
  'invoice.reminder': invoiceReminder,
  'invoice.due': invoiceDue,
  'reminders.reconcile': remindersReconcile,
  'idempotency.prune': idempotencyPrune,
  'webhook.fanout': webhookFanout,
  'webhook.deliver': webhookDeliver,
  'events.prune': eventsPrune,
  'chain.watch': chainWatch,
  'checkouts.expire': checkoutsExpire,
  'invoice.payment_failed': invoicePaymentFailed,
  'subscriptions.charge': subscriptionsCharge,
  'subscriptions.cancel': subscriptionsCancel,
};
