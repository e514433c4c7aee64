// SQL of the deliveries table: one row per email the service means to send.
import type { DeliveryKind } from '../domain/delivery-kinds.js';
import type { Queryable } from './pool.js';

export type { DeliveryKind };
export type DeliveryStatus = 'pending' | 'retrying' | 'sent' | 'failed';

export interface DeliveryRow {
  id: string;
  invoice_id: string;
  kind: DeliveryKind;
  slot_at: Date;
  status: DeliveryStatus;
  attempt: number;
  message_id: string;
  error: string | null;
  created_at: Date;
  sent_at: Date | null;
}

const COLUMNS = 'id, invoice_id, kind, slot_at, status, attempt, message_id, error, created_at, sent_at';

/** The delivery of (invoice, kind, slot), created on first call: a slot fired twice is one row. */
export async function upsertDelivery(
  db: Queryable,
  d: { id: string; invoiceId: string; kind: DeliveryKind; slotAt: Date; messageId: string },
): Promise<DeliveryRow> {
  // "do update" (a no-op) rather than "do nothing": it returns the existing row even when a
  // concurrent insert of the same slot committed after this statement's snapshot was taken.
  const { rows } = await db.query<DeliveryRow>(
    `insert into deliveries (id, invoice_id, kind, slot_at, message_id) values ($1, $2, $3, $4, $5)
     on conflict (invoice_id, kind, slot_at) do update set updated_at = deliveries.updated_at
     returning ${COLUMNS}`,
    [d.id, d.invoiceId, d.kind, d.slotAt, d.messageId],
  );
  return rows[0];
}

/**
 * Locks a delivery for sending. SKIP LOCKED: if another worker holds it, that worker is sending
 * right now and this call returns null; if that worker dies, its connection closes, the lock
 * goes, and its stalled job is retried.
 */
export async function lockDelivery(db: Queryable, id: string): Promise<DeliveryRow | null> {
  const { rows } = await db.query<DeliveryRow>({
    name: 'lock-delivery',
    text: `select ${COLUMNS} from deliveries where id = $1 for update skip locked`,
    values: [id],
  });
  return rows[0] ?? null;
}

/** Marks the delivery sent, recording where the message went ('smtp', 'sandbox_smtp', 'outbox' and the server or file). */
export async function markDeliverySent(db: Queryable, id: string, where: { transport: string; destination: string }): Promise<void> {
  await db.query(
    `update deliveries set status = 'sent', attempt = attempt + 1, error = null, sent_at = now(), updated_at = now(),
       transport = $2, destination = $3 where id = $1`,
    [id, where.transport, where.destination],
  );
}

export async function markDeliveryFailed(db: Queryable, id: string, status: 'retrying' | 'failed', error: string): Promise<void> {
  await db.query('update deliveries set status = $2, attempt = attempt + 1, error = $3, updated_at = now() where id = $1', [
    id, status, error.slice(0, 1000),
  ]);
}

export async function listDeliveries(db: Queryable, invoiceId: string): Promise<DeliveryRow[]> {
  const { rows } = await db.query<DeliveryRow>(`select ${COLUMNS} from deliveries where invoice_id = $1 order by slot_at, kind`, [invoiceId]);
  return rows;
}

/**
 * Gives a delivery written by the database (a receipt, see migration 1700000001201) its
 * Message-ID, once; returns the row's.
 */
export async function ensureMessageId(db: Queryable, id: string, messageId: string): Promise<string | null> {
  const { rows } = await db.query<{ message_id: string }>(
    `update deliveries set message_id = case when message_id = '' then $2 else message_id end where id = $1 returning message_id`,
    [id, messageId],
  );
  return rows[0]?.message_id ?? null;
}

/** Drops a delivery that was never attempted (a reminder slot that turned out not to be due). */
export async function deletePendingDelivery(db: Queryable, id: string): Promise<void> {
  await db.query(`delete from deliveries where id = $1 and status = 'pending' and attempt = 0`, [id]);
}
