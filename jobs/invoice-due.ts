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
  const runs = (r: typeof t) => !!r && r.invoice_emailed && remindersShouldRun({ status: r.status, remindersEnabled: r.reminders_enabled, dueAt: r.due_at });
  if (t && t.due_at && runs(t)) {
    await ctx.reminders.schedulers.switchToAfter({ id: t.id, dueAt: t.due_at, timeZone: t.time_zone }, new Date());
    // Paid (or reminders off) between the read above and the upsert: the stop notification may
    // have removed the old scheduler before the upsert made a new one. Read again; a change
    // committed after this read notifies the workers after the upsert, so it cannot be missed.
    if (!runs(await findReminderTarget(ctx.pool, payload.invoiceId))) await ctx.reminders.stop(payload.invoiceId);
  }
  return turned ? 'overdue' : `unchanged (${t?.status ?? 'missing'})`;
};
