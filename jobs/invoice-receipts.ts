// `invoice.receipts`: the receipts owed by up to 500 invoices that one statement turned paid (a
// range of the payment detector). The database wrote this job's outbox row in the transaction
// that marked them paid (migration 1700000003100); here each invoice gets its receipt delivery and
// its `invoice.receipt` job, once: a retry, or a second run, owes nothing twice.
import { oweReceipts } from '../src/db/outbox.js';
import type { InvoiceReceiptsPayload } from '../src/queue/catalogue.js';
import type { JobHandler } from '../src/queue/dispatcher.js';
import type { JobContext } from '../src/queue/job-context.js';

export const invoiceReceipts: JobHandler<InvoiceReceiptsPayload, JobContext> = async (payload, ctx) => {
  const owed = await oweReceipts(ctx.pool, payload.invoiceIds);
  return `${owed} of ${payload.invoiceIds.length} receipts owed`;
};
