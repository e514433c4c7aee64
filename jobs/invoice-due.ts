// `invoice.due`: a delayed job at the invoice's due_at. Turns an unpaid open invoice overdue (a
// conditional update that never touches a paid or void one) and moves its reminders to the
// post-due phase.
import { findReminderTarget, markOverdue } from '../src/db/reminders.js';
import type { InvoiceDuePayload } from '../src/queue/catalogue.js';
import type { JobHandler } from '../src/queue/dispatcher.js';
import type { JobContext } from '../src/queue/job-context.js';

export const invoiceDue: JobHandler<InvoiceDuePayload, JobContext> = async (payload, ctx) => {
  const turned = await markOverdue(ctx.pool, payload.invoiceId);
  await ctx.reminders.atDueDate(payload.invoiceId);
  if (turned) return 'overdue';
  return `unchanged (${(await findReminderTarget(ctx.pool, payload.invoiceId))?.status ?? 'missing'})`;
};
