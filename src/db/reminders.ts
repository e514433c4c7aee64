// SQL the reminder machinery needs: which invoices qualify, in which zone, and what was sent.
import type { InvoiceStatus } from '../domain/invoice-rules.js';
import type { Queryable } from './pool.js';

export interface ReminderTarget {
  id: string;
  status: InvoiceStatus;
  reminders_enabled: boolean;
  due_at: Date | null;
  sent_at: Date | null;
  /** Customer's zone when known, else the account's. */
  time_zone: string;
  /** Planned slot of the latest reminder recorded, if any. */
  last_slot_at: Date | null;
  /** When reminders were last turned on again after being off: no slot before it is ever sent. */
  reminders_resumed_at: Date | null;
  /** The invoice email itself was accepted: reminders never go out before it. */
  invoice_emailed: boolean;
}

const SELECT = `select i.id, i.status, i.reminders_enabled, i.due_at, i.sent_at, i.reminders_resumed_at,
    coalesce(c.time_zone, a.time_zone) as time_zone,
    (select max(d.slot_at) from deliveries d where d.invoice_id = i.id and d.kind in ('reminder_before', 'reminder_after')) as last_slot_at,
    exists (select 1 from deliveries d where d.invoice_id = i.id and d.kind = 'invoice' and d.status = 'sent') as invoice_emailed
  from invoices i join customers c on c.id = i.customer_id join accounts a on a.id = i.account_id`;

export async function findReminderTarget(db: Queryable, invoiceId: string): Promise<ReminderTarget | null> {
  const { rows } = await db.query<ReminderTarget>({ name: 'reminder-target', text: `${SELECT} where i.id = $1`, values: [invoiceId] });
  return rows[0] ?? null;
}

/**
 * Every invoice that should be on a reminder schedule or wait for its due date: unpaid, sent,
 * with a due date (whether reminders run for it is decided per row, remindersRunFor). The status
 * list is the partial index's, so the scan stays on it.
 */
export async function listReminderTargets(db: Queryable): Promise<ReminderTarget[]> {
  const { rows } = await db.query<ReminderTarget>(`${SELECT} where i.status in ('open', 'overdue') and i.due_at is not null`);
  return rows;
}

/** Which of these invoice ids exist in this database (a scheduler for any other is not ours). */
export async function existingInvoiceIds(db: Queryable, ids: string[]): Promise<Set<string>> {
  if (ids.length === 0) return new Set();
  const { rows } = await db.query<{ id: string }>('select id from invoices where id = any($1)', [ids]);
  return new Set(rows.map((r) => r.id));
}

/**
 * open -> overdue; never touches a paid, void or already overdue invoice. Called by the job
 * delayed to the due date: no clock comparison here, a worker clock a few ms ahead of the
 * database's must not leave the invoice open.
 */
export async function markOverdue(db: Queryable, invoiceId: string): Promise<boolean> {
  const { rowCount } = await db.query(
    `update invoices set status = 'overdue', updated_at = now()
     where id = $1 and status = 'open' and due_at is not null`,
    [invoiceId],
  );
  return rowCount === 1;
}

/** Records the reminder on the invoice and, in the same statement's transaction, its invoice.reminder_sent event. */
export async function recordReminderSent(db: Queryable, invoiceId: string): Promise<void> {
  await db.query(
    `with r as (update invoices set last_reminder_at = now() where id = $1 returning id)
     select emit_invoice_event(id, 'invoice.reminder_sent', jsonb_build_object('last_reminder_at', now())) from r`,
    [invoiceId],
  );
}

/**
 * Re-checks, under a share lock held until the caller's commit, that the invoice still wants
 * reminders: a payment committing meanwhile waits for this transaction.
 */
export async function lockIfRemindersRun(db: Queryable, invoiceId: string, slot: Date): Promise<boolean> {
  // A slot before reminders were last turned on again passed while they were off: never caught up.
  const { rows } = await db.query<{ ok: boolean }>(
    `select invoice_reminders_run(status, reminders_enabled, due_at) and (reminders_resumed_at is null or reminders_resumed_at <= $2) as ok
     from invoices where id = $1 for share`,
    [invoiceId, slot],
  );
  return rows[0]?.ok === true;
}

/** Whether reminders run for the invoice now (no lock): a skipped slot's job leaves a running schedule alone. */
export async function remindersRun(db: Queryable, invoiceId: string): Promise<boolean> {
  const { rows } = await db.query<{ ok: boolean }>(`select invoice_reminders_run(status, reminders_enabled, due_at) as ok from invoices where id = $1`, [invoiceId]);
  return rows[0]?.ok === true;
}
