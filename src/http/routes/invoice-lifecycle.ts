// The rest of an invoice's life: void a sent one, delete a draft, list them a page at a time,
// read back the lines as written, download the PDF.
import type { FastifyReply } from 'fastify';
import { Type } from 'typebox';
import { deleteDraft, findInvoice, findLines, listInvoices, markVoid } from '../../db/invoices.js';
import { loadInvoiceForMail } from '../../db/invoice-for-mail.js';
import { withTransaction } from '../../db/pool.js';
import { canDelete, nextStatus } from '../../domain/invoice-rules.js';
import { formatDecimal, lineTotal, Money } from '../../domain/money.js';
import { notFound } from '../../errors.js';
import { issuedInvoicePdf } from '../../pdf/issued-invoice-pdf.js';
import { stampFor } from '../../pdf/invoice-stamp.js';
import { renderInvoicePdf } from '../../pdf/invoice-pdf.js';
import type { AppDeps } from '../types.js';
import { coerceLimit, listBody, pageRequest } from '../pagination.js';
import { presentInvoice } from '../presenters.js';
import { Data, DeletedObject, Invoice, InvoiceIdParams, InvoiceLine, ListInvoicesQuery, ListOf } from '../schemas/index.js';
import type { Api } from '../types.js';
import { errorResponses, unwrap } from '../route-helpers.js';

export async function invoiceLifecycleRoutes(app: Api, deps: AppDeps): Promise<void> {
  const { pool } = deps;

  app.get(
    '/invoices',
    {
      preValidation: coerceLimit,
      schema: {
        tags: ['invoices'],
        summary: 'List invoices, newest first, a page at a time (filters: status, customer_email)',
        querystring: ListInvoicesQuery,
        response: { 200: ListOf(Invoice), ...errorResponses },
      },
    },
    async (req) => {
      const q = req.query;
      const result = await listInvoices(pool, req.auth, { status: q.status, customerEmail: q.customer_email }, pageRequest(q));
      return listBody(result, 'invoice', (r) => presentInvoice(r, deps.config.chains));
    },
  );

  app.post(
    '/invoices/:invoiceId/void',
    {
      schema: {
        tags: ['invoices'],
        summary: 'Void an open or overdue invoice: it stays readable, its reminders stop at once',
        params: InvoiceIdParams,
        response: { 200: Data(Invoice), ...errorResponses },
      },
    },
    async (req) => {
      const row = await withTransaction(pool, async (tx) => {
        const inv = await findInvoice(tx, req.auth, req.params.invoiceId, true);
        if (!inv) throw notFound('invoice', req.params.invoiceId);
        unwrap(nextStatus(inv.status, 'void'));
        // Under the row lock the status cannot change between the check and this update. The
        // event of the change (invoice.voided) comes from the status-change trigger of the
        // events schema, in this same transaction.
        return (await markVoid(tx, inv.id))!;
      });
      // The schedule goes before the response. Should Redis be unreachable, the reminder job's
      // re-check in Postgres (and its share lock against this update) still keeps every email
      // from leaving, the stop notification of the status change reaches the workers, and the
      // due-date job leaves a void invoice untouched.
      if (deps.reminders) {
        try {
          await deps.reminders.stop(row.id);
        } catch (err) {
          req.log.warn({ err, invoice_id: row.id }, 'could not remove reminder schedules now; the void re-check still stops every email');
        }
      }
      return { data: presentInvoice(row, deps.config.chains) };
    },
  );

  app.delete(
    '/invoices/:invoiceId',
    {
      schema: {
        tags: ['invoices'],
        summary: 'Delete a draft invoice (a sent one is voided instead)',
        params: InvoiceIdParams,
        response: { 200: Data(DeletedObject), ...errorResponses },
      },
    },
    async (req) => {
      await withTransaction(pool, async (tx) => {
        // The row lock orders the delete against a concurrent send: a send that commits first
        // makes this a refusal; one that comes second finds nothing to send.
        const inv = await findInvoice(tx, req.auth, req.params.invoiceId, true);
        if (!inv) throw notFound('invoice', req.params.invoiceId);
        unwrap(canDelete(inv.status));
        await deleteDraft(tx, inv.id);
      });
      return { data: { id: req.params.invoiceId, deleted: true } };
    },
  );

  app.get(
    '/invoices/:invoiceId/lines',
    {
      schema: {
        tags: ['invoices'],
        summary: 'The line items of an invoice as written, with their totals',
        params: InvoiceIdParams,
        response: { 200: Data(Type.Array(InvoiceLine)), ...errorResponses },
      },
    },
    async (req) => {
      const inv = await findInvoice(pool, req.auth, req.params.invoiceId);
      if (!inv) throw notFound('invoice', req.params.invoiceId);
      const lines = await findLines(pool, inv.id);
      return {
        data: lines.map((l) => {
          const unitAmount = new Money(l.unit_amount);
          return {
            description: l.description,
            quantity: l.quantity,
            unit_amount: formatDecimal(unitAmount),
            amount: formatDecimal(lineTotal({ quantity: l.quantity, unitAmount })),
          };
        }),
      };
    },
  );

  app.get(
    '/invoices/:invoiceId/pdf',
    {
      schema: {
        tags: ['invoices'],
        summary: 'The invoice PDF: for an open or overdue invoice the very document the customer was emailed; a draft preview marked DRAFT; paid marked PAID with its date; void marked VOID',
        params: InvoiceIdParams,
        response: {
          200: { description: 'The PDF', content: { 'application/pdf': { schema: { type: 'string', format: 'binary' } } } },
          ...errorResponses,
        },
      },
    },
    async (req, reply) => {
      const inv = await findInvoice(pool, req.auth, req.params.invoiceId);
      if (!inv) throw notFound('invoice', req.params.invoiceId);
      const loaded = await loadInvoiceForMail(pool, inv.id, deps.config);
      if (!loaded) throw notFound('invoice', req.params.invoiceId); // deleted meanwhile
      const stamp = stampFor(inv.status, { paidAt: inv.paid_at, voidedAt: inv.voided_at, updatedAt: inv.updated_at }, loaded.doc.timeZone, loaded.doc.locale);
      // Sent and unpaid: the kept document (rendered and kept here if the send job has not run
      // yet; the job then attaches these bytes). Otherwise a fresh render with its stamp.
      const render = deps.renderPdf ?? renderInvoicePdf;
      const pdf = stamp ? await render({ ...loaded.doc, stamp }) : await issuedInvoicePdf(pool, loaded.doc, render);
      const name = `${(inv.code ?? inv.id).replace(/[^\w.-]/g, '_')}${stamp ? `-${stamp.label.toLowerCase()}` : ''}.pdf`;
      // Bytes, not JSON: sent past the schema's serializer, which the typed reply would require.
      return (reply as FastifyReply)
        .header('content-type', 'application/pdf')
        .header('content-disposition', `inline; filename="${name}"`)
        .header('cache-control', 'private, no-cache')
        .send(pdf);
    },
  );
}
