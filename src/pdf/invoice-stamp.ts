// Which state a downloaded invoice PDF is stamped with. The document the customer was emailed
// (open, overdue) carries no stamp; a draft is a preview; paid and void say so, with their date.
import type { InvoiceStatus } from '../domain/invoice-rules.js';
import { formatDocumentDate } from '../domain/invoice-format.js';
import type { InvoiceStamp } from '../domain/invoice-document.js';

export function stampFor(
  status: InvoiceStatus,
  dates: { paidAt: Date | null; voidedAt: Date | null; updatedAt: Date },
  timeZone: string,
): InvoiceStamp | undefined {
  const day = (d: Date) => formatDocumentDate(d.toISOString(), timeZone);
  switch (status) {
    case 'open':
    case 'overdue':
      return undefined;
    case 'draft':
      return { label: 'DRAFT', note: 'Preview, not an invoice yet: it is numbered and issued when sent' };
    case 'paid':
      return { label: 'PAID', note: `Paid on ${day(dates.paidAt ?? dates.updatedAt)}` };
    case 'void':
      return { label: 'VOID', note: `Voided on ${day(dates.voidedAt ?? dates.updatedAt)}; nothing is owed` };
  }
}
