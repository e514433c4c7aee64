// SQL of webhook deliveries: one row per (event, endpoint), with every attempt it took.
import { eventJoin, eventOfRow, EVENT_WITH_INVOICE_COLUMNS, type EventRow } from './events.js';
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

/** A delivery claimed by a worker's batch, with what its attempt needs from its endpoint. */
export interface ClaimedDelivery {
  id: string;
  event_id: string;
  endpoint_id: string;
  /** The endpoint's account: one account may not hold every slot of a worker. */
  account_id: string;
  attempt_count: number;
  created_at: Date;
  /** Null before the first attempt. */
  first_attempt_at: Date | null;
  url: string;
  endpoint_status: 'enabled' | 'disabled';
  /** The secrets that sign now: the current one, and the previous one during a rotation's overlap. */
  secrets: string[];
}

export interface ClaimOptions {
  leaseId: string;
  leaseMs: number;
  limit: number;
  perEndpoint: number;
  busyEndpoints: string[];
  busyRemaining: number[];
  scan: number;
}

// The candidates are the oldest `scan` due ones, read in due order by an index scan
// (webhook_deliveries_due), then locked and leased by their ctid with TID scans
// (webhook_deliveries_lease_due): two migrations' functions with their own planner settings. On a
// table whose statistics predate a burst (one row, say, or none), the planner read every due
// delivery and sorted them, joined the candidates back to the table as a nested loop over both
// (664 ms for 1,000 candidates), read every pending delivery to find the candidates' ctids, and
// walked every delivery once per leased row to join them back by id (all measured, the last by a
// review on a table analysed empty with autovacuum off). A row changed
// since the candidates were read is not found at its old ctid, or fails the re-check after the
// lock (it is not pending and due any more: another claim has it).
const CLAIM_CTES = `with busy as (
       select * from unnest($6::text[], $7::int[]) as b(endpoint_id, remaining)
     ), due as (
       select row_ctid as ctid, endpoint_id, row_number() over (partition by endpoint_id order by due_at, id) as nth
       from webhook_deliveries_due(array(select endpoint_id from busy where remaining <= 0), $5) oldest
     ), leased as (
       select * from webhook_deliveries_lease_due(
         array(select due.ctid from due left join busy on busy.endpoint_id = due.endpoint_id where due.nth <= coalesce(busy.remaining, $4)),
         $3, $1, $2)
     )`;

// first_attempt_at is read only after an attempt: an attempt's row is written with the count's
// increment (recordDeliveryOutcomes), so a count of 0 has none, and the read (a bitmap scan of the
// attempts per row, 42 us each in a claim of 100 first attempts) is skipped.
const CLAIM_SELECT = `select l.id, l.event_id, l.endpoint_id, l.attempt_count, l.created_at,
       case when l.attempt_count > 0 then (select min(a.started_at) from webhook_attempts a where a.delivery_id = l.id) end as first_attempt_at,
       w.url, w.status as endpoint_status, w.account_id,
       array_remove(array[w.secret, case when w.previous_secret_expires_at > clock_timestamp() then w.previous_secret end], null) as secrets
     from leased l join webhook_endpoints w on w.id = l.endpoint_id`;

const claimParams = (opts: ClaimOptions) => [opts.leaseId, opts.leaseMs, opts.limit, opts.perEndpoint, opts.scan, opts.busyEndpoints, opts.busyRemaining];

/**
 * Claims up to `limit` due deliveries (oldest due first) in one statement and leases them to
 * `leaseId` for `leaseMs`: next_attempt_at moves to the lease's end, so they are due again if the
 * claimer never records them (a crash), and another worker's claim skips them meanwhile (SKIP
 * LOCKED while this one commits, not due after).
 *
 * The candidates are the oldest `scan` due rows of the endpoints not at their bound, cut per
 * endpoint to `perEndpoint`, or to what `busyEndpoints` (the claimer's endpoints with deliveries
 * in flight) have left in `busyRemaining`: an endpoint with a backlog takes at most its share,
 * and one at its bound (a slow one) is skipped, its backlog with it.
 */
export async function claimDueDeliveries(db: Queryable, opts: ClaimOptions): Promise<ClaimedDelivery[]> {
  const { rows } = await db.query<ClaimedDelivery>(`${CLAIM_CTES}
     ${CLAIM_SELECT}`, claimParams(opts));
  return rows;
}

/**
 * claimDueDeliveries, and the claimed deliveries' events (as loadEvents reads them) in the same
 * statement: the worker can send as soon as the claim returns, with no round trip between.
 */
export async function claimDueDeliveriesWithEvents(db: Queryable, opts: ClaimOptions): Promise<{ claimed: ClaimedDelivery[]; events: Map<string, EventRow> }> {
  const { rows } = await db.query<ClaimedDelivery & Record<string, unknown>>(
    `${CLAIM_CTES}, claimed as (${CLAIM_SELECT})
     select claimed.*, ${EVENT_WITH_INVOICE_COLUMNS} from claimed left ${eventJoin('claimed.event_id')}`,
    claimParams(opts),
  );
  const claimed: ClaimedDelivery[] = [];
  const events = new Map<string, EventRow>();
  for (const r of rows) {
    claimed.push({
      id: r.id,
      event_id: r.event_id,
      endpoint_id: r.endpoint_id,
      account_id: r.account_id,
      attempt_count: r.attempt_count,
      created_at: r.created_at,
      first_attempt_at: r.first_attempt_at,
      url: r.url,
      endpoint_status: r.endpoint_status,
      secrets: r.secrets,
    });
    if (r.ev_id !== null && !events.has(r.event_id)) events.set(r.event_id, eventOfRow(r));
  }
  return { claimed, events };
}

/**
 * Hands claimed deliveries that were never sent back: due at once, unleased, for any worker's next
 * claim (a first attempt in its place, due at its creation). Only those still under the lease
 * that claimed them (a lease that ran out is another's).
 */
export async function releaseDeliveries(db: Queryable, deliveries: { id: string; leaseId: string }[]): Promise<number> {
  const { rowCount } = await db.query(
    `update webhook_deliveries d set next_attempt_at = case when d.attempt_count = 0 then null else clock_timestamp() end,
       lease_id = null, updated_at = clock_timestamp()
     from unnest($1::text[], $2::uuid[]) as r(id, lease_id)
     where d.id = r.id and d.lease_id = r.lease_id and d.status = 'pending'`,
    [deliveries.map((d) => d.id), deliveries.map((d) => d.leaseId)],
  );
  return rowCount ?? 0;
}

/** What became of one claimed delivery. */
export interface DeliveryOutcome {
  id: string;
  status: WebhookDeliveryStatus;
  /** Null when settled (succeeded or failed). */
  nextAttemptAt: Date | null;
  /** The attempt made, or null when none was (the endpoint is disabled: the delivery just ends). */
  attempt: AttemptResult | null;
  /** The delivery's last_error when no attempt was made. */
  error?: string;
}

export interface AttemptResult {
  startedAt: Date;
  statusCode: number | null;
  durationMs: number;
  error: string | null;
}

/** An endpoint's failure clock after a batch: any 2xx stops it, else the first failure starts it. */
export interface EndpointHealth {
  endpointId: string;
  succeeded: boolean;
  /** The earliest failed attempt of the batch (when none succeeded). */
  firstFailureAt: Date | null;
}

/**
 * Records outcomes in one statement: each delivery's new state and attempt (only where its lease
 * is still the outcome's: a lease that ran out belongs to whoever claimed the delivery since),
 * its attempt row, and each endpoint's failure clock. Returns how many deliveries were recorded
 * and, for the endpoints still failing, since when.
 */
export async function recordDeliveryOutcomes(
  db: Queryable,
  /** leaseId: the claim's lease; the outcome is recorded only while the delivery is still under it. */
  outcomes: (DeliveryOutcome & { leaseId: string })[],
  health: EndpointHealth[],
): Promise<{ recorded: number; failing: { endpointId: string; failingSince: Date }[] }> {
  const clip = (e: string | null | undefined) => (e == null ? null : e.slice(0, 1000));
  const { rows } = await db.query<{ recorded: number; failing: { endpoint_id: string; failing_since: string }[] }>(
    `with o as (
       select * from unnest($1::uuid[], $2::text[], $3::text[], $4::timestamptz[], $5::boolean[], $6::int[], $7::text[], $8::int[], $9::timestamptz[])
         as o(lease_id, id, status, next_at, attempted, status_code, error, duration_ms, started_at)
     ), d as (
       update webhook_deliveries d set
         attempt_count = d.attempt_count + o.attempted::int,
         status = o.status,
         last_status_code = case when o.attempted then o.status_code else d.last_status_code end,
         last_error = o.error,
         last_duration_ms = case when o.attempted then o.duration_ms else d.last_duration_ms end,
         next_attempt_at = o.next_at,
         succeeded_at = case when o.status = 'succeeded' then clock_timestamp() end,
         lease_id = null,
         updated_at = clock_timestamp()
       from o where d.id = o.id and d.lease_id = o.lease_id and d.status = 'pending'
       returning d.id, d.attempt_count
     ), a as (
       insert into webhook_attempts (delivery_id, attempt, started_at, status_code, duration_ms, error)
       select d.id, d.attempt_count, o.started_at, o.status_code, o.duration_ms, o.error from d join o on o.id = d.id
       where o.attempted
       on conflict do nothing
     ), h as (
       update webhook_endpoints w set failing_since = case when h.succeeded then null else coalesce(w.failing_since, h.first_failure_at) end
       from unnest($10::text[], $11::boolean[], $12::timestamptz[]) as h(id, succeeded, first_failure_at)
       where w.id = h.id and (not h.succeeded or w.failing_since is not null)
       returning w.id, w.failing_since
     )
     select (select count(*)::int from d) as recorded,
       coalesce((select json_agg(json_build_object('endpoint_id', h.id, 'failing_since', h.failing_since)) from h where h.failing_since is not null), '[]') as failing`,
    [
      outcomes.map((o) => o.leaseId),
      outcomes.map((o) => o.id),
      outcomes.map((o) => o.status),
      outcomes.map((o) => o.nextAttemptAt),
      outcomes.map((o) => o.attempt !== null),
      outcomes.map((o) => o.attempt?.statusCode ?? null),
      outcomes.map((o) => clip(o.attempt ? o.attempt.error : o.error)),
      outcomes.map((o) => (o.attempt ? Math.round(o.attempt.durationMs) : null)),
      outcomes.map((o) => o.attempt?.startedAt ?? null),
      health.map((h) => h.endpointId),
      health.map((h) => h.succeeded),
      health.map((h) => h.firstFailureAt),
    ],
  );
  return {
    recorded: rows[0].recorded,
    failing: rows[0].failing.map((f) => ({ endpointId: f.endpoint_id, failingSince: new Date(f.failing_since) })),
  };
}

/** When the next pending delivery falls due (a lease's end included); null when none is pending. */
export async function nextDeliveryDueAt(db: Queryable): Promise<Date | null> {
  const { rows } = await db.query<{ at: Date | null }>(
    `select min(coalesce(next_attempt_at, created_at)) as at from webhook_deliveries where status = 'pending'`,
  );
  return rows[0].at;
}

/** Deliveries not yet settled: the backlog metric. */
export async function countPendingDeliveries(db: Queryable): Promise<number> {
  const { rows } = await db.query<{ n: number }>(`select count(*)::int as n from webhook_deliveries where status = 'pending'`);
  return rows[0].n;
}
