// Which state a downloaded invoice PDF is stamped with. The document the customer was emailed
// (open, overdue) carries no stamp; a draft is a preview; paid and void say so, with their date,
// in the invoice's language like the rest of the document.
import type { InvoiceStatus } from '../domain/invoice-rules.js';
import { formatDocumentDate } from '../domain/invoice-format.js';
import type { InvoiceStamp } from '../domain/invoice-document.js';
import { messagesFor } from '../i18n/messages.js';

export function stampFor(
  status: InvoiceStatus,
  dates: { paidAt: Date | null; voidedAt: Date | null; updatedAt: Date },
  timeZone: string,
  locale = 'en',
): InvoiceStamp | undefined {
  const m = messagesFor(locale);
  const day = (d: Date) => formatDocumentDate(d.toISOString(), timeZone, m.language);
  switch (status) {
    case 'open':
    case 'overdue':
      return undefined;
    case 'draft':
      return { label: 'DRAFT', text: m.t('pdf.stamp.draft'), note: m.t('pdf.stamp.draftNote') };
    case 'paid':
      return { label: 'PAID', text: m.t('pdf.stamp.paid'), note: m.t('pdf.stamp.paidNote', { date: day(dates.paidAt ?? dates.updatedAt) }) };
    case 'void':
      return { label: 'VOID', text: m.t('pdf.stamp.void'), note: m.t('pdf.stamp.voidNote', { date: day(dates.voidedAt ?? dates.updatedAt) }) };
  }
}
