// SQL of the kept PDFs of sent invoices (see the migration invoice-pdfs).
import { createHash } from 'node:crypto';
import type { Queryable } from './pool.js';

export async function findInvoicePdf(db: Queryable, invoiceId: string): Promise<Buffer | null> {
  const { rows } = await db.query<{ pdf: Buffer }>({
    name: 'find-invoice-pdf',
    text: 'select pdf from invoice_pdfs where invoice_id = $1',
    values: [invoiceId],
  });
  return rows[0]?.pdf ?? null;
}

/**
 * Keeps `pdf` as the invoice's document unless one is kept already, and returns the kept one:
 * two renders racing (the send job and a download) end up handing out the same bytes.
 */
export async function keepInvoicePdf(db: Queryable, invoiceId: string, pdf: Buffer): Promise<Buffer> {
  const sha256 = createHash('sha256').update(pdf).digest();
  const { rows } = await db.query<{ pdf: Buffer }>(
    `with kept as (
       insert into invoice_pdfs (invoice_id, pdf, sha256) values ($1, $2, $3)
       on conflict (invoice_id) do nothing
       returning pdf)
     select pdf from kept
     union all
     select pdf from invoice_pdfs where invoice_id = $1 and not exists (select 1 from kept)`,
    [invoiceId, pdf, sha256],
  );
  // The union's second half reads the snapshot before the insert: when another transaction
  // won the race after it, read again.
  return rows[0]?.pdf ?? (await findInvoicePdf(db, invoiceId)) ?? pdf;
}
