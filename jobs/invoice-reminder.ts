// `invoice.reminder`: fired by the invoice's job scheduler at each planned slot. Re-reads the
// invoice first: only an open or overdue invoice with reminders on gets an email; otherwise its
// schedule is removed and nothing is sent. One email per (invoice, slot), however often it fires.
// The handler also keeps the schedule in step: a slot planned under another reminder policy is
// re-planned instead of sent, and after every slot the scheduler moves on when its phase is used up.
import { deletePendingDelivery, upsertDelivery } from '../src/db/deliveries.js';
import { loadInvoiceForMail } from '../src/db/invoice-for-mail.js';
import { lockIfRemindersRun, recordReminderSent, remindersRun } from '../src/db/reminders.js';
import { newId } from '../src/domain/ids.js';
import { remindersShouldRun } from '../src/domain/invoice-rules.js';
import { reminderKindOf } from '../src/domain/reminder-schedule.js';
import type { Logger } from '../src/log.js';
import { messageIdFor } from '../src/mail/message-id.js';
import type { JobHandler } from '../src/queue/dispatcher.js';
import type { ReminderJobData } from '../src/queue/catalogue.js';
import type { JobContext } from '../src/queue/job-context.js';
import { plannedInstantOf, type FiredReminder } from '../src/queue/reminder-schedulers.js';
import { emailInvoiceDocument } from './steps/email-invoice-document.js';

export const invoiceReminder: JobHandler<ReminderJobData, JobContext> = async (payload, ctx, meta) => {
  const fired: FiredReminder = { id: meta.jobId, queueName: meta.source.queueName, data: payload, opts: meta.source.opts };
  // A slot planned under another reminder policy (this worker started with other REMINDERS_*
  // values and its start's reconcile has not reached this invoice yet) is not sent: the
  // invoice moves to this worker's policy, future slots only, as the reconcile would.
  if (!ctx.reminders.plannedUnderPolicy(fired)) {
    await ctx.reminders.resume(payload.invoiceId);
    ctx.log.info('reminder planned under another policy: re-planned, not sent');
    return 'replanned';
  }
  try {
    return await remind(payload, ctx, plannedInstantOf(fired));
  } finally {
    // After the last slot of a phase the scheduler moves on or is removed (see
    // reminder-schedulers.ts), whatever this slot's outcome: a failed last slot must not
    // leave an exhausted scheduler behind.
    await ctx.reminders
      .advance(fired, new Date())
      .catch((err: unknown) => ctx.log.warn({ err }, 'could not advance the reminder schedule'));
  }
};

/** Sends the reminder of the slot `slot` (its dedup key), unless it went out already or is no longer due. */
async function remind(payload: ReminderJobData, ctx: JobContext & { log: Logger }, slot: Date): Promise<string> {
  const loaded = await loadInvoiceForMail(ctx.pool, payload.invoiceId, ctx.config);
  if (!loaded || !remindersShouldRun(loaded)) {
    await ctx.reminders.stop(payload.invoiceId);
    return 'stopped';
  }
  ctx.observeReminderLateness?.(Math.max(0, Date.now() - slot.getTime()) / 1000);
  const kind = reminderKindOf(payload.phase);
  const id = newId('dlv');
  const delivery = await upsertDelivery(ctx.pool, {
    id,
    invoiceId: payload.invoiceId,
    kind,
    slotAt: slot,
    messageId: messageIdFor(id, ctx.config.mailFrom),
  });
  if (delivery.status === 'sent') {
    ctx.countEmail?.(kind, 'skipped');
    return 'already_sent';
  }
  const result = await emailInvoiceDocument(ctx, loaded, kind, delivery.id, (tx) => lockIfRemindersRun(tx, payload.invoiceId, slot), slot);
  if (!result.sent) {
    ctx.countEmail?.(kind, 'skipped');
    if (result.reason === 'no_longer_due') {
      // Paid or turned off meanwhile: this slot will never be sent, so it is not in the timeline,
      // and the schedule goes. A slot that passed while reminders were off, its job run after they
      // were turned on again, is only skipped: the schedule "on" made stays.
      await deletePendingDelivery(ctx.pool, delivery.id);
      if (!(await remindersRun(ctx.pool, payload.invoiceId))) await ctx.reminders.stop(payload.invoiceId);
    }
    return result.reason;
  }
  await recordReminderSent(ctx.pool, payload.invoiceId);
  ctx.countEmail?.(kind, 'sent');
  ctx.log.info({ message_id: result.messageId, slot: slot.toISOString(), kind }, 'reminder emailed');
  return 'sent';
}
