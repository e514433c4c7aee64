// `invoice.receipts`: the receipts owed by up to 500 invoices that one statement turned paid (a
// range of the payment detector). The database wrote this job's outbox row in the transaction
// that marked them paid (migration 1700000003100); here each invoice gets its receipt delivery and
// its `invoice.receipt` job, once: a retry, or a second run, owes nothing twice. The row is deleted
// in the same statement; one left behind (this job lost or out of attempts) is owed by the
// reconciler (reminders-reconcile.ts).
import { oweFanOutReceipts } from '../src/db/outbox.js';
import type { InvoiceReceiptsPayload } from '../src/queue/catalogue.js';
import type { JobHandler } from '../src/queue/dispatcher.js';
import type { JobContext } from '../src/queue/job-context.js';

export const invoiceReceipts: JobHandler<InvoiceReceiptsPayload, JobContext> = async (payload, ctx, meta) => {
  // The job id is the row's (the relay adds the job under it).
  const owed = await oweFanOutReceipts(ctx.pool, meta.jobId, payload.invoiceIds);
  return `${owed} of ${payload.invoiceIds.length} receipts owed`;
};
