// `invoice.reminder`: fired by the invoice's job scheduler at each planned slot. Re-reads the
// invoice first: only an open or overdue invoice with reminders on gets an email; otherwise its
// schedule is removed and nothing is sent. One email per (invoice, slot), however often it fires.
import { deletePendingDelivery, upsertDelivery } from '../src/db/deliveries.js';
import { loadInvoiceForMail } from '../src/db/invoice-for-mail.js';
import { lockIfRemindersRun, recordReminderSent } from '../src/db/reminders.js';
import { newId } from '../src/domain/ids.js';
import { remindersShouldRun } from '../src/domain/invoice-rules.js';
import { reminderKindOf } from '../src/domain/reminder-schedule.js';
import { messageIdFor } from '../src/mail/message-id.js';
import type { JobHandler } from '../src/queue/dispatcher.js';
import type { ReminderJobData } from '../src/queue/catalogue.js';
import type { JobContext } from '../src/queue/job-context.js';
import { emailInvoiceDocument } from './steps/email-invoice-document.js';

export const invoiceReminder: JobHandler<ReminderJobData, JobContext> = async (payload, ctx, meta) => {
  const loaded = await loadInvoiceForMail(ctx.pool, payload.invoiceId, ctx.config.paymentPageBase);
  if (!loaded || !remindersShouldRun(loaded)) {
    await ctx.reminders.stop(payload.invoiceId);
    return 'stopped';
  }
  ctx.observeReminderLateness?.(Math.max(0, Date.now() - meta.plannedAt.getTime()) / 1000);
  const kind = reminderKindOf(payload.phase);
  const id = newId('dlv');
  const delivery = await upsertDelivery(ctx.pool, {
    id,
    invoiceId: payload.invoiceId,
    kind,
    slotAt: meta.plannedAt,
    messageId: messageIdFor(id, ctx.config.mailFrom),
  });
  if (delivery.status === 'sent') {
    ctx.countEmail?.(kind, 'skipped');
    return 'already_sent';
  }
  const result = await emailInvoiceDocument(ctx, loaded, kind, delivery.id, (tx) => lockIfRemindersRun(tx, payload.invoiceId), meta.plannedAt);
  if (!result.sent) {
    ctx.countEmail?.(kind, 'skipped');
    if (result.reason === 'no_longer_due') {
      // Paid or turned off meanwhile: this slot will never be sent, so it is not in the timeline.
      await deletePendingDelivery(ctx.pool, delivery.id);
      await ctx.reminders.stop(payload.invoiceId);
    }
    return result.reason;
  }
  await recordReminderSent(ctx.pool, payload.invoiceId);
  ctx.countEmail?.(kind, 'sent');
  ctx.log.info({ message_id: result.messageId, slot: meta.plannedAt.toISOString(), kind }, 'reminder emailed');
  return 'sent';
};
