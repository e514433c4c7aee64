// SQL of webhook deliveries: one row per (event, endpoint), with every attempt it took.
import type { Queryable } from './pool.js';

export type WebhookDeliveryStatus = 'pending' | 'succeeded' | 'failed';

export interface WebhookAttemptRow {
  attempt: number;
  started_at: Date;
  status_code: number | null;
  duration_ms: number;
  error: string | null;
}

export interface WebhookDeliveryRow {
  id: string;
  event_id: string;
  event_type: string;
  endpoint_id: string;
  status: WebhookDeliveryStatus;
  attempt_count: number;
  last_status_code: number | null;
  last_error: string | null;
  last_duration_ms: number | null;
  next_attempt_at: Date | null;
  succeeded_at: Date | null;
  created_at: Date;
  updated_at: Date;
  attempts: WebhookAttemptRow[];
}

const COLUMNS = `d.id, d.event_id, e.type as event_type, d.endpoint_id, d.status, d.attempt_count, d.last_status_code,
  d.last_error, d.last_duration_ms, d.next_attempt_at, d.succeeded_at, d.created_at, d.updated_at`;

/** Creates the deliveries of an event to these endpoints; existing ones are kept as they are. */
export async function insertDeliveries(db: Queryable, eventId: string, rows: { id: string; endpointId: string }[]): Promise<void> {
  if (rows.length === 0) return;
  await db.query(
    `insert into webhook_deliveries (id, event_id, endpoint_id)
     select d, $1, w from unnest($2::text[], $3::text[]) as t(d, w)
     on conflict (event_id, endpoint_id) do nothing`,
    [eventId, rows.map((r) => r.id), rows.map((r) => r.endpointId)],
  );
}

async function withAttempts(db: Queryable, rows: Omit<WebhookDeliveryRow, 'attempts'>[]): Promise<WebhookDeliveryRow[]> {
  if (rows.length === 0) return [];
  const { rows: attempts } = await db.query<WebhookAttemptRow & { delivery_id: string }>(
    `select delivery_id, attempt, started_at, status_code, duration_ms, error from webhook_attempts
     where delivery_id = any($1::text[]) order by delivery_id, attempt`,
    [rows.map((r) => r.id)],
  );
  const byDelivery = new Map<string, WebhookAttemptRow[]>();
  for (const { delivery_id, ...a } of attempts) {
    const list = byDelivery.get(delivery_id) ?? [];
    list.push(a);
    byDelivery.set(delivery_id, list);
  }
  return rows.map((r) => ({ ...r, attempts: byDelivery.get(r.id) ?? [] }));
}

/** An endpoint's deliveries, newest first, `limit + 1` read to tell whether more follow. */
export async function listDeliveries(
  db: Queryable,
  endpointId: string,
  opts: { limit: number; startingAfter: string | null },
): Promise<{ deliveries: WebhookDeliveryRow[]; hasMore: boolean; cursorFound: boolean }> {
  let cursor: { created_at: Date; id: string } | null = null;
  if (opts.startingAfter !== null) {
    const { rows } = await db.query<{ created_at: Date; id: string }>(
      'select created_at, id from webhook_deliveries where id = $1 and endpoint_id = $2',
      [opts.startingAfter, endpointId],
    );
    if (!rows[0]) return { deliveries: [], hasMore: false, cursorFound: false };
    cursor = rows[0];
  }
  const { rows } = await db.query<Omit<WebhookDeliveryRow, 'attempts'>>(
    `select ${COLUMNS} from webhook_deliveries d join events e on e.id = d.event_id
     where d.endpoint_id = $1 and ($2::timestamptz is null or (d.created_at, d.id) < ($2::timestamptz, $3::text))
     order by d.created_at desc, d.id desc limit $4`,
    [endpointId, cursor?.created_at ?? null, cursor?.id ?? null, opts.limit + 1],
  );
  const page = rows.slice(0, opts.limit);
  return { deliveries: await withAttempts(db, page), hasMore: rows.length > opts.limit, cursorFound: true };
}

export interface DeliveryForWorker {
  id: string;
  status: WebhookDeliveryStatus;
  attempt_count: number;
  created_at: Date;
  event_created_at: Date;
  /** Null before the first attempt. */
  first_attempt_at: Date | null;
}

/** The delivery of (event, endpoint) with its event's creation instant, for the worker. */
export async function findDelivery(
  db: Queryable,
  eventId: string,
  endpointId: string,
): Promise<DeliveryForWorker | null> {
  const { rows } = await db.query<DeliveryForWorker>(
    `select d.id, d.status, d.attempt_count, d.created_at, e.created_at as event_created_at,
       (select min(a.started_at) from webhook_attempts a where a.delivery_id = d.id) as first_attempt_at
     from webhook_deliveries d join events e on e.id = d.event_id
     where d.event_id = $1 and d.endpoint_id = $2`,
    [eventId, endpointId],
  );
  return rows[0] ?? null;
}

export interface AttemptResult {
  startedAt: Date;
  statusCode: number | null;
  durationMs: number;
  error: string | null;
}

/**
 * Records one attempt and the delivery's new state: succeeded, failed (no more attempts), or
 * pending until `nextAttemptAt`. Returns the attempt's number.
 */
export async function recordAttempt(
  db: Queryable,
  deliveryId: string,
  result: AttemptResult,
  outcome: { status: WebhookDeliveryStatus; nextAttemptAt: Date | null },
): Promise<number> {
  const { rows } = await db.query<{ attempt_count: number }>(
    `update webhook_deliveries set attempt_count = attempt_count + 1, status = $2, last_status_code = $3, last_error = $4,
       last_duration_ms = $5, next_attempt_at = $6, succeeded_at = case when $2 = 'succeeded' then clock_timestamp() end,
       updated_at = clock_timestamp()
     where id = $1 returning attempt_count`,
    [deliveryId, outcome.status, result.statusCode, result.error?.slice(0, 1000) ?? null, Math.round(result.durationMs), outcome.nextAttemptAt],
  );
  const attempt = rows[0]?.attempt_count ?? 0;
  if (attempt > 0) {
    await db.query(
      `insert into webhook_attempts (delivery_id, attempt, started_at, status_code, duration_ms, error)
       values ($1, $2, $3, $4, $5, $6) on conflict do nothing`,
      [deliveryId, attempt, result.startedAt, result.statusCode, Math.round(result.durationMs), result.error?.slice(0, 1000) ?? null],
    );
  }
  return attempt;
}

/** Ends a delivery that will not be attempted again (its endpoint was disabled). */
export async function failDelivery(db: Queryable, deliveryId: string, error: string): Promise<void> {
  await db.query(
    `update webhook_deliveries set status = 'failed', last_error = $2, next_attempt_at = null, updated_at = clock_timestamp()
     where id = $1 and status = 'pending'`,
    [deliveryId, error],
  );
}

/** Deliveries not yet settled: the backlog metric. */
export async function countPendingDeliveries(db: Queryable): Promise<number> {
  const { rows } = await db.query<{ n: number }>(`select count(*)::int as n from webhook_deliveries where status = 'pending'`);
  return rows[0].n;
}
