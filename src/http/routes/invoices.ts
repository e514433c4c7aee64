import type { Decimal } from 'decimal.js';
import { setCustomerLocale, upsertCustomer } from '../../db/customers.js';
import { emitInvoiceEvent } from '../../db/events.js';
import {
  findInvoice,
  findInvoiceWithCredential,
  findLines,
  insertInvoice,
  replaceLines,
  setRemindersEnabled,
  updateDraft,
  type InvoiceRow,
} from '../../db/invoices.js';
import { withTransaction } from '../../db/pool.js';
import { newId, newInvoiceReference } from '../../domain/ids.js';
import { nextStatus, resolveAmountEdit, type ParsedLine } from '../../domain/invoice-rules.js';
import { feeAtomic, formatDecimal, Money, toAtomic } from '../../domain/money.js';
import { resolveToken } from '../../domain/tokens.js';
import { DEFAULT_LOCALE, parseLocale, SUPPORTED_LANGUAGES } from '../../domain/locale.js';
import { ApiError, notFound } from '../../errors.js';
import { sendInvoice } from '../../invoicing/issue.js';
import { buildReminderTimeline } from '../reminder-timeline.js';
import { errorResponses, publishQuietly, unwrap } from '../route-helpers.js';
import { canonicalTimeZone } from '../../domain/time-zone.js';
import type { AppDeps } from '../types.js';
import { authorize, type AuthContext } from '../auth.js';
import { presentInvoice } from '../presenters.js';
import { CreateInvoiceBody, Data, Invoice, InvoiceIdParams, ReminderTimeline, SetRemindersBody, UpdateInvoiceBody } from '../schemas/index.js';
import type { Api } from '../types.js';

/** `customer_locale` as given, canonical; a language without templates is a 400. */
function localeOf(given: string | undefined): string | undefined {
  if (given === undefined) return undefined;
  const locale = parseLocale(given);
  if (locale === null) {
    throw new ApiError(
      'unsupported_locale',
      `customer_locale ${JSON.stringify(given)} is not supported; use one of ${SUPPORTED_LANGUAGES.join(', ')} (a region may follow, e.g. de-AT).`,
      'customer_locale',
    );
  }
  return locale;
}

function amounts(total: Decimal | null, decimals: number, feeBps: number) {
  if (total === null) return { amount: null, amountAtomic: null, feeAtomic: null };
  const atomic = toAtomic(total, decimals);
  return { amount: formatDecimal(total), amountAtomic: atomic, feeAtomic: feeAtomic(atomic, feeBps) };
}

const linesForDb = (lines: ParsedLine[]) =>
  lines.map((l) => ({ description: l.description, quantity: l.quantity, unitAmount: formatDecimal(l.unitAmount) }));

export async function invoiceRoutes(app: Api, deps: AppDeps): Promise<void> {
  const { pool } = deps;

  async function load(auth: AuthContext, id: string): Promise<InvoiceRow> {
    const row = await findInvoice(pool, auth, id);
    if (!row) throw notFound('invoice', id);
    return row;
  }

  app.post(
    '/invoices',
    { schema: { tags: ['invoices'], summary: 'Create a draft invoice', body: CreateInvoiceBody, response: { 200: Data(Invoice), ...errorResponses } } },
    async (req) => {
      const body = req.body;
      const token = resolveToken(deps.config.chains, req.auth.environment, body.network, body.currency);
      if (!token.ok) throw new ApiError(token.code, token.message);
      const timeZone = body.customer_time_zone === undefined ? null : canonicalTimeZone(body.customer_time_zone);
      if (body.customer_time_zone !== undefined && timeZone === null) {
        throw new ApiError('invalid_time_zone', `customer_time_zone must be an IANA time zone such as Europe/Paris.`, 'customer_time_zone');
      }
      const locale = localeOf(body.customer_locale);
      const edit = unwrap(resolveAmountEdit(body, token.token.decimals, []));
      const money = amounts(edit.amount ?? null, token.token.decimals, req.auth.platformFeeBps);
      const row = await withTransaction(pool, async (tx) => {
        const customer = await upsertCustomer(tx, req.auth, body.customer_email, body.customer_name ?? null, timeZone, locale ?? null);
        const inv = await insertInvoice(tx, {
          id: newId('inv'),
          scope: req.auth,
          customerId: customer.id,
          reference: newInvoiceReference(),
          ...money,
          currency: token.token.currency,
          network: token.token.network,
          chainId: token.token.chainId,
          tokenAddress: token.token.address,
          tokenDecimals: token.token.decimals,
          remindersEnabled: body.reminders_enabled ?? true,
          metadata: body.metadata ?? {},
          dueAt: body.due_at ?? null,
          memo: body.memo ?? null,
          footer: body.footer ?? null,
          taxId: body.tax_id ?? null,
          // The customer's stored locale (just updated when one was given) is the default.
          customerLocale: customer.locale ?? DEFAULT_LOCALE,
          feeBps: req.auth.platformFeeBps,
        });
        if (edit.lines) await replaceLines(tx, inv.id, linesForDb(edit.lines));
        return inv;
      });
      return { data: presentInvoice(row, deps.config.chains) };
    },
  );

  app.get(
    '/invoices/:invoiceId',
    {
      // The hot read: key and invoice in one statement (see auth.ts).
      config: { auth: 'in-query' },
      schema: { tags: ['invoices'], summary: 'Retrieve an invoice', params: InvoiceIdParams, response: { 200: Data(Invoice), ...errorResponses } },
    },
    async (req) => {
      const row = await findInvoiceWithCredential(pool, req.presentedKey.hash, req.params.invoiceId);
      req.auth = authorize(req.presentedKey, row ?? undefined);
      if (!row?.invoice) throw notFound('invoice', req.params.invoiceId);
      return { data: presentInvoice(row.invoice, deps.config.chains) };
    },
  );

  app.patch(
    '/invoices/:invoiceId',
    {
      schema: {
        tags: ['invoices'],
        summary: 'Update a draft invoice',
        params: InvoiceIdParams,
        body: UpdateInvoiceBody,
        response: { 200: Data(Invoice), ...errorResponses },
      },
    },
    async (req) => {
      const body = req.body;
      const locale = localeOf(body.customer_locale);
      // The row lock orders this edit against a concurrent send: whichever commits first wins,
      // and an edit that comes second sees the invoice is no longer a draft.
      const row = await withTransaction(pool, async (tx) => {
        const inv = await findInvoice(tx, req.auth, req.params.invoiceId, true);
        if (!inv) throw notFound('invoice', req.params.invoiceId);
        unwrap(nextStatus(inv.status, 'edit'));
        const current = (await findLines(tx, inv.id)).map((l) => ({ description: l.description, quantity: l.quantity, unitAmount: new Money(l.unit_amount) }));
        const edit = unwrap(resolveAmountEdit(body, inv.token_decimals, current));
        const updated = await updateDraft(tx, inv.id, {
          amount: edit.amount === undefined ? undefined : amounts(edit.amount, inv.token_decimals, req.auth.platformFeeBps),
          dueAt: body.due_at,
          memo: body.memo,
          footer: body.footer,
          taxId: body.tax_id,
          customerLocale: locale,
        });
        if (edit.lines) await replaceLines(tx, inv.id, linesForDb(edit.lines));
        if (locale !== undefined) await setCustomerLocale(tx, inv.customer_id, locale);
        await emitInvoiceEvent(tx, inv.id, 'invoice.updated');
        return updated;
      });
      return { data: presentInvoice(row, deps.config.chains) };
    },
  );

  app.post(
    '/invoices/:invoiceId/send',
    { schema: { tags: ['invoices'], summary: 'Finalise a draft and email it with its PDF', params: InvoiceIdParams, response: { 200: Data(Invoice), ...errorResponses } } },
    async (req) => {
      // With a publisher the job is handed over right below, and the workers' relay holds off.
      const { row, job } = await sendInvoice(pool, req.auth, req.params.invoiceId, deps.config.mailFrom, deps.outbox !== undefined);
      await publishQuietly(deps, [job], req.log);
      return { data: presentInvoice(row, deps.config.chains) };
    },
  );

  app.post(
    '/invoices/:invoiceId/reminders',
    {
      schema: {
        tags: ['invoices'],
        summary: 'Turn reminders on or off',
        params: InvoiceIdParams,
        body: SetRemindersBody,
        response: { 200: Data(Invoice), ...errorResponses },
      },
    },
    async (req) => {
      const row = await withTransaction(pool, async (tx) => {
        const inv = await findInvoice(tx, req.auth, req.params.invoiceId, true);
        if (!inv) throw notFound('invoice', req.params.invoiceId);
        unwrap(nextStatus(inv.status, 'set_reminders'));
        const updated = await setRemindersEnabled(tx, inv.id, req.body.enabled);
        if (inv.reminders_enabled !== req.body.enabled) await emitInvoiceEvent(tx, inv.id, 'invoice.updated');
        return updated;
      });
      if (deps.reminders && (row.status === 'open' || row.status === 'overdue')) {
        // Before the response: "off" means no reminder is scheduled any more when the caller
        // reads 200. Should Redis be unreachable, the reminder job's own re-check in Postgres
        // still keeps every email from leaving, and the reconciler repairs Redis later.
        try {
          if (req.body.enabled) await deps.reminders.resume(row.id);
          else await deps.reminders.stop(row.id);
        } catch (err) {
          req.log.warn({ err, invoice_id: row.id }, 'could not update reminder schedules now; the reconciler will');
        }
      }
      return { data: presentInvoice(row, deps.config.chains) };
    },
  );

  app.get(
    '/invoices/:invoiceId/reminders',
    {
      schema: {
        tags: ['invoices'],
        summary: 'Reminder timeline: past reminders with their delivery status, next planned slots',
        params: InvoiceIdParams,
        response: { 200: Data(ReminderTimeline), ...errorResponses },
      },
    },
    async (req) => {
      const inv = await load(req.auth, req.params.invoiceId);
      return { data: await buildReminderTimeline(deps, inv, req.auth.accountTimeZone) };
    },
  );
}
