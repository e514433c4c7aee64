// Every queue and job name the service uses, with the payload each job carries. Producers and
// handlers import the types from here, so both sides agree on the shape.

export const SEND_QUEUE = 'invoice-send';
export const REMINDER_QUEUE = 'invoice-reminders';
export const ALL_QUEUES = [SEND_QUEUE, REMINDER_QUEUE] as const;

export const JOB_INVOICE_SEND = 'invoice.send';

export interface InvoiceSendPayload {
  invoiceId: string;
  deliveryId: string;
}

/** The "payment received" email with its receipt PDF; the row comes from a database trigger. */
export const JOB_INVOICE_RECEIPT = 'invoice.receipt';

export interface InvoiceReceiptPayload {
  invoiceId: string;
  deliveryId: string;
}

/** BullMQ job ids must not contain ':'; the id names the invoice and the delivery, so re-adding the same send is a no-op. */
export function invoiceSendJobId(p: InvoiceSendPayload): string {
  return `${JOB_INVOICE_SEND}-${p.invoiceId}-${p.deliveryId}`;
}
