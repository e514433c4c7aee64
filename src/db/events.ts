// SQL of events: the one writer (emit_event, in SQL, shared with the invoice trigger), the list
// and the retrieval. Invoice events hold the invoice row as it was; it is read back here as an
// InvoiceRow (jsonb_populate_record keeps numerics exact), for the API's Invoice presenter.
import type { Environment } from '../domain/environment.js';
import type { EventType } from '../domain/events.js';
import { QUALIFIED_COLUMNS, type InvoiceRow, type Scope } from './invoices.js';
import { listPage, type PageRequest, type PageResult } from './page.js';
import type { Queryable } from './pool.js';

export interface EventRow {
  id: string;
  account_id: string;
  environment: Environment;
  type: EventType;
  object_type: string;
  object_id: string;
  /** The presented object, for events written with one. */
  object: Record<string, unknown> | null;
  /** The invoice as it was, for invoice events. */
  invoice: InvoiceRow | null;
  created_at: Date;
}

const COLUMNS = 'e.id, e.account_id, e.environment, e.type, e.object_type, e.object_id, e.object, e.created_at';

/** Records an event whose object the caller presented (non-invoice objects). Returns its id. */
export async function emitEvent(
  db: Queryable,
  scope: Scope,
  type: EventType,
  objectType: string,
  objectId: string,
  object: object,
): Promise<string> {
  const { rows } = await db.query<{ id: string }>('select emit_event($1, $2, $3, $4, $5, $6::jsonb, null) as id', [
    scope.accountId, scope.environment, type, objectType, objectId, JSON.stringify(object),
  ]);
  return rows[0].id;
}

/**
 * Records an event about an invoice as its row stands in the caller's transaction, with `patch`
 * applied (columns the caller updates after commit). It only reads the invoice: no row lock.
 */
export async function emitInvoiceEvent(db: Queryable, invoiceId: string, type: EventType, patch: Record<string, unknown> = {}): Promise<string | null> {
  const { rows } = await db.query<{ id: string | null }>('select emit_invoice_event($1, $2, $3::jsonb) as id', [invoiceId, type, JSON.stringify(patch)]);
  return rows[0].id;
}

async function attachInvoices(db: Queryable, events: Omit<EventRow, 'invoice'>[]): Promise<EventRow[]> {
  const ids = events.filter((e) => e.object === null).map((e) => e.id);
  const invoices = new Map<string, InvoiceRow>();
  if (ids.length > 0) {
    const { rows } = await db.query<InvoiceRow & { event_id: string }>(
      `select e.id as event_id, ${QUALIFIED_COLUMNS}
       from events e cross join lateral jsonb_populate_record(null::invoices, e.snapshot) i
       where e.id = any($1::text[])`,
      [ids],
    );
    for (const { event_id, ...inv } of rows) invoices.set(event_id, inv);
  }
  return events.map((e) => ({ ...e, invoice: invoices.get(e.id) ?? null }));
}

export async function findEvent(db: Queryable, scope: Scope, id: string): Promise<EventRow | null> {
  const { rows } = await db.query<Omit<EventRow, 'invoice'>>(
    `select ${COLUMNS} from events e where e.id = $1 and e.account_id = $2 and e.environment = $3`,
    [id, scope.accountId, scope.environment],
  );
  if (!rows[0]) return null;
  return (await attachInvoices(db, rows))[0];
}

// An event and, for an invoice event, its invoice as it was, in one row beside other columns:
// the event's columns under `ev_`, the invoice's under `inv_` (it has columns of the same names).
const EVENT_PREFIXED = ['id', 'account_id', 'environment', 'type', 'object_type', 'object_id', 'object', 'created_at'].map((c) => `e.${c} as ev_${c}`).join(', ');
const INVOICE_PREFIXED = QUALIFIED_COLUMNS.split(', ')
  .map((c) => {
    const alias = / as (\w+)$/.exec(c);
    return alias ? c.replace(/ as \w+$/, ` as inv_${alias[1]}`) : `${c} as inv_${c.slice('i.'.length)}`;
  })
  .join(', ');

/** Select list of eventJoin's event and invoice (see eventOfRow). */
export const EVENT_WITH_INVOICE_COLUMNS = `${EVENT_PREFIXED}, ${INVOICE_PREFIXED}`;

/** Joins the event whose id is `eventId` (a column or expression) as `e`, its invoice snapshot as `i`. */
export const eventJoin = (eventId: string) =>
  `join events e on e.id = ${eventId} left join lateral jsonb_populate_record(null::invoices, e.snapshot) i on e.object is null`;

/** The EventRow of a row selected with EVENT_WITH_INVOICE_COLUMNS. */
export function eventOfRow(row: Record<string, unknown>): EventRow {
  const invoice: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(row)) if (k.startsWith('inv_')) invoice[k.slice('inv_'.length)] = v;
  const object = row.ev_object as EventRow['object'];
  return {
    id: row.ev_id as string,
    account_id: row.ev_account_id as string,
    environment: row.ev_environment as Environment,
    type: row.ev_type as EventType,
    object_type: row.ev_object_type as string,
    object_id: row.ev_object_id as string,
    object,
    invoice: object === null ? (invoice as unknown as InvoiceRow) : null,
    created_at: row.ev_created_at as Date,
  };
}

/** Events by id, whatever their account: for the delivery worker's batch (one statement). */
export async function loadEvents(db: Queryable, ids: string[]): Promise<Map<string, EventRow>> {
  if (ids.length === 0) return new Map();
  const { rows } = await db.query<Record<string, unknown>>(
    `select ${EVENT_WITH_INVOICE_COLUMNS} from unnest($1::text[]) as want(id) ${eventJoin('want.id')}`,
    [ids],
  );
  return new Map(rows.map((r) => { const e = eventOfRow(r); return [e.id, e]; }));
}

/** Any event by id, whatever its account: for the delivery worker. */
export async function loadEvent(db: Queryable, id: string): Promise<EventRow | null> {
  const { rows } = await db.query<Omit<EventRow, 'invoice'>>(`select ${COLUMNS} from events e where e.id = $1`, [id]);
  if (!rows[0]) return null;
  return (await attachInvoices(db, rows))[0];
}

/** One page of the scope's events, newest first, optionally of one type. */
export async function listEvents(db: Queryable, scope: Scope, type: EventType | null, page: PageRequest): Promise<PageResult<EventRow>> {
  const result = await listPage<Omit<EventRow, 'invoice'>>(db, scope, {
    table: 'events',
    select: `select ${COLUMNS} from events e`,
    alias: 'e',
    filters: type === null ? [] : ['e.type = $5'],
    values: type === null ? [] : [type],
  }, page);
  if (!result.ok) return result;
  return { ...result, rows: await attachInvoices(db, result.rows) };
}

/** Deletes events created before the cutoff (their deliveries go with them), in batches. */
export async function pruneEvents(db: Queryable, before: Date, batch = 5_000): Promise<number> {
  let total = 0;
  for (;;) {
    const { rowCount } = await db.query(
      `delete from events where id in (select id from events where created_at < $1 limit $2)`,
      [before, batch],
    );
    total += rowCount ?? 0;
    if ((rowCount ?? 0) < batch) return total;
  }
}
