// `invoice.due`: a delayed job at the invoice's due_at. Turns an unpaid open invoice overdue (a
// conditional update that never touches a paid or void one) and moves its reminders to the
// post-due phase.
import { findReminderTarget, markOverdue } from '../src/db/reminders.js';
import { remindersShouldRun } from '../src/domain/invoice-rules.js';
import type { JobHandler } from '../src/queue/dispatcher.js';
import type { InvoiceDuePayload } from '../src/queue/reminder-service.js';
import type { JobContext } from './context.js';

export const invoiceDue: JobHandler<InvoiceDuePayload, JobContext> = async (payload, ctx) => {
  const turned = await markOverdue(ctx.pool, payload.invoiceId);
  const t = await findReminderTarget(ctx.pool, payload.invoiceId);
  if (t && t.due_at && remindersShouldRun({ status: t.status, remindersEnabled: t.reminders_enabled, dueAt: t.due_at })) {
    await ctx.reminders.schedulers.switchToAfter({ id: t.id, dueAt: t.due_at, timeZone: t.time_zone }, new Date());
  }
  return turned ? 'overdue' : `unchanged (${t?.status ?? 'missing'})`;
};
