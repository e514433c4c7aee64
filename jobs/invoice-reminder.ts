// `invoice.reminder`: fired by the invoice's job scheduler at each planned slot. Re-reads the
// invoice first: only an open or overdue invoice with reminders on gets an email; otherwise its
// schedule is removed and nothing is sent. One email per (invoice, slot), however often it fires.
import { deletePendingDelivery, upsertDelivery } from '../src/db/deliveries.js';
import { loadInvoiceForMail } from '../src/db/invoice-document.js';
import { lockIfRemindersRun, recordReminderSent } from '../src/db/reminders.js';
import { newId } from '../src/domain/ids.js';
import { remindersShouldRun } from '../src/domain/invoice-rules.js';
import { reminderKindOf } from '../src/domain/reminder-schedule.js';
import { deliverOnce } from '../src/mail/deliver-once.js';
import { messageIdFor } from '../src/mail/message-id.js';
import { renderEmail } from '../src/mail/render-email.js';
import { issuedInvoicePdf } from '../src/pdf/issued-invoice-pdf.js';
import type { JobHandler } from '../src/queue/dispatcher.js';
import type { ReminderJobData } from '../src/queue/reminder-schedulers.js';
import type { JobContext } from './context.js';
import { invoiceMessage } from './invoice-message.js';

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
  // The kept document: the same bytes as the invoice email's attachment and a download.
  const pdf = await issuedInvoicePdf(ctx.pool, loaded.doc);
  const email = renderEmail(kind, loaded.doc);
  const result = await deliverOnce(
    ctx.pool,
    ctx.mail,
    delivery.id,
    (messageId) => invoiceMessage(ctx.config, loaded, email, pdf, messageId),
    (tx) => lockIfRemindersRun(tx, payload.invoiceId),
  ).catch((err: unknown) => {
    ctx.countEmail?.(kind, 'failed');
    throw err;
  });
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
