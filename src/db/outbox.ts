// The transactional outbox: a job is recorded in the same transaction as the change that needs
// it, and handed to BullMQ after commit by the API (fast path) or by the worker's relay.
import type { Queryable } from './pool.js';

export interface OutboxRow {
  id: string;
  job_name: string;
  job_id: string;
  payload: Record<string, unknown>;
}

/**
 * Records a job. `holdMs`: the writer hands the job over itself right after commit, so the
 * workers' relay leaves the row alone for that long (and is not woken for it); null, at once.
 */
export async function insertOutbox(db: Queryable, jobName: string, jobId: string, payload: object, holdMs: number | null = null): Promise<void> {
  await db.query(
    `insert into outbox (job_name, job_id, payload, held_until)
     values ($1, $2, $3, clock_timestamp() + $4::int * interval '1 millisecond')
     on conflict (job_id) do nothing`,
    [jobName, jobId, JSON.stringify(payload), holdMs],
  );
}

/** Hands held rows back to the relay (their writer could not hand them over) and wakes it. */
export async function releaseOutboxHold(db: Queryable, jobIds: string[]): Promise<void> {
  await db.query(
    `with released as (
       update outbox set held_until = null
        where job_id = any($1::text[]) and enqueued_at is null and held_until is not null
       returning 1
     )
     select pg_notify('outbox_pending', '') where exists (select 1 from released)`,
    [jobIds],
  );
}

/** Owes the receipts of these invoices (their deliveries and outbox rows; none twice): how many were owed now. */
export async function oweReceipts(db: Queryable, invoiceIds: readonly string[]): Promise<number> {
  const { rows } = await db.query<{ owed: number }>('select owe_receipts($1::text[]) as owed', [invoiceIds]);
  return rows[0].owed;
}

/**
 * The work of an `invoice.receipts` job: owes its invoices' receipts and deletes its fan-out row,
 * in one statement (a row still there is one whose receipts may not be owed yet). How many were owed now.
 */
export async function oweFanOutReceipts(db: Queryable, jobId: string, invoiceIds: readonly string[]): Promise<number> {
  const { rows } = await db.query<{ owed: number }>(
    // The row's delete first (the main query reads it), then the receipts: the order in which the
    // reconciler's sweep takes the same locks, so the two never deadlock.
    `with done as (delete from outbox where job_id = $1 and job_name = 'invoice.receipts' returning 1)
     select owe_receipts($2::text[]) as owed from (select count(*) from done) deleted`,
    [jobId, invoiceIds],
  );
  return rows[0].owed;
}

/**
 * Owes the receipts of up to `limit` fan-out rows whose job never did (handed over at least
 * `olderThanMs` ago and still there: lost with Redis, or out of attempts; or set aside by a worker
 * that did not know the job) and deletes them. Running with the job owes nothing twice.
 */
export async function oweStrandedReceipts(db: Queryable, olderThanMs: number, limit: number): Promise<{ rows: number; owed: number }> {
  const { rows } = await db.query<{ rows: number; owed: number }>(
    `with stranded as (
       delete from outbox where id in (
         select id from outbox
          where job_name = 'invoice.receipts'
            and (enqueued_at < now() - $1::int * interval '1 millisecond' or failed_at is not null)
          order by id limit $2
          for update skip locked)
       returning payload
     )
     select count(*)::int as rows,
            coalesce(sum(owe_receipts(array(select jsonb_array_elements_text(s.payload->'invoiceIds')))), 0)::int as owed
       from stranded s`,
    [olderThanMs, limit],
  );
  return rows[0];
}

/**
 * Hands over again the outbox rows of up to `limit` emails owed and not sent ('pending', or
 * 'retrying' with attempts left) whose delivery has not moved, and whose row was handed over,
 * at least `olderThanMs` ago: the queue store may have lost the job (Redis flushed, or restarted
 * without persistence). `jobOf`: the job of each delivery kind, whose job id is
 * `<job>-<invoice>-<delivery>`. While the job exists the relay's add is a no-op (same job id); a
 * lost one is added again, and its delivery row keeps it to one email. Returns how many.
 */
export async function handUnsentAgain(
  db: Queryable,
  jobOf: Readonly<Record<string, string>>,
  o: { olderThanMs: number; maxAttempts: number; limit: number },
): Promise<number> {
  const kinds = Object.keys(jobOf);
  const { rows } = await db.query<{ n: number }>(
    `with stale as (
       select o.id from deliveries d
       join unnest($1::text[], $2::text[]) as k (kind, job_name) on k.kind = d.kind
       join outbox o on o.job_id = k.job_name || '-' || d.invoice_id || '-' || d.id
       where d.status in ('pending', 'retrying') and d.updated_at < now() - $3::int * interval '1 millisecond'
         and d.attempt < $4 and o.enqueued_at < now() - $3::int * interval '1 millisecond'
       -- Handed over again, a row goes to the back (its enqueued_at is now): rows whose job exists
       -- but does not move (a long backlog, a job failing before it reaches the SMTP server) come up
       -- once per period and never crowd out a row whose job was lost.
       order by o.enqueued_at
       limit $5
     ),
     again as (
       update outbox set enqueued_at = null, held_until = null where id in (select id from stale) returning 1
     ),
     n as (select count(*)::int as n from again)
     select n.n from n left join lateral (select pg_notify('outbox_pending', '') where n.n > 0) woken on true`,
    [kinds, kinds.map((k) => jobOf[k]), o.olderThanMs, o.maxAttempts, o.limit],
  );
  return rows[0].n;
}

/** The receipt job the database queued when this invoice turned paid, if not handed over yet. */
export async function pendingReceiptJob(db: Queryable, invoiceId: string): Promise<{ job_id: string; delivery_id: string } | null> {
  const { rows } = await db.query<{ job_id: string; delivery_id: string }>(
    `select job_id, payload->>'deliveryId' as delivery_id from outbox
     where job_name = 'invoice.receipt' and payload->>'invoiceId' = $1 and enqueued_at is null`,
    [invoiceId],
  );
  return rows[0] ?? null;
}

/** Oldest rows not yet handed over to BullMQ (rows set aside, and rows still held by their writer, excluded). */
export async function pendingOutbox(db: Queryable, limit: number): Promise<OutboxRow[]> {
  // Ordered by the table's id: the select's id is text, and "10" sorts before "9".
  const { rows } = await db.query<OutboxRow>(
    `select id::text as id, job_name, job_id, payload from outbox
      where enqueued_at is null and failed_at is null and (held_until is null or held_until <= now())
      order by outbox.id limit $1`,
    [limit],
  );
  return rows;
}

/** In how many ms the earliest hold of a pending row ends; null when no pending row is held. */
export async function nextHoldEndMs(db: Queryable): Promise<number | null> {
  const { rows } = await db.query<{ ms: number | null }>(
    `select ceil(extract(epoch from min(held_until) - now()) * 1000)::int as ms from outbox
      where enqueued_at is null and failed_at is null and held_until > now()`,
  );
  return rows[0].ms;
}

/**
 * Sets pending rows aside for good (the relay skips them from now on); returns the rows this call
 * set aside, so a row seen by two relays at once is reported once.
 */
export async function setOutboxRowsAside(db: Queryable, ids: string[], reason: string): Promise<OutboxRow[]> {
  const { rows } = await db.query<OutboxRow>(
    `update outbox set failed_at = now(), failed_reason = $2
      where id = any($1::bigint[]) and enqueued_at is null and failed_at is null
     returning id::text as id, job_name, job_id, payload`,
    [ids, reason],
  );
  return rows;
}

export async function markEnqueued(db: Queryable, jobIds: string[]): Promise<void> {
  await db.query('update outbox set enqueued_at = now() where job_id = any($1::text[]) and enqueued_at is null', [jobIds]);
}

export async function countPendingOutbox(db: Queryable): Promise<number> {
  const { rows } = await db.query<{ n: number }>('select count(*)::int as n from outbox where enqueued_at is null and failed_at is null');
  return rows[0].n;
}
