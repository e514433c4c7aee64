// SQL of webhook endpoints: the merchant's CRUD, secret rotation, and what the delivery worker
// needs (who wants an event, disabling one that failed for the whole retry window).
import type { Environment } from '../domain/environment.js';
import type { Scope } from './invoices.js';
import type { Queryable } from './pool.js';
import { lockScopeFamily } from './scope.js';

export interface WebhookEndpointRow {
  id: string;
  account_id: string;
  environment: Environment;
  url: string;
  description: string | null;
  enabled_events: string[];
  status: 'enabled' | 'disabled';
  disabled_reason: string | null;
  previous_secret_expires_at: Date | null;
  failing_since: Date | null;
  created_at: Date;
  updated_at: Date;
}

// The secrets are selected only where they are used (signing, or returned once).
const COLUMNS = `id, account_id, environment, url, description, enabled_events, status, disabled_reason,
  previous_secret_expires_at, failing_since, created_at, updated_at`;

export async function insertEndpoint(
  db: Queryable,
  e: { id: string; scope: Scope; url: string; description: string | null; enabledEvents: string[]; secret: string },
): Promise<WebhookEndpointRow> {
  const { rows } = await db.query<WebhookEndpointRow>(
    `insert into webhook_endpoints (id, account_id, environment, url, description, enabled_events, secret)
     values ($1, $2, $3, $4, $5, $6, $7) returning ${COLUMNS}`,
    [e.id, e.scope.accountId, e.scope.environment, e.url, e.description, e.enabledEvents, e.secret],
  );
  return rows[0];
}

/**
 * How many endpoints the scope has and which one already has `url`, read under the scope's
 * endpoint lock (taken here): the caller's insert or URL change in the same transaction cannot
 * race another one past the cap or onto the same URL.
 */
export async function lockEndpointsForWrite(tx: Queryable, scope: Scope, url: string): Promise<{ count: number; sameUrlId: string | null }> {
  await lockScopeFamily(tx, 'webhook_endpoints', scope);
  const { rows } = await tx.query<{ count: number; same_url_id: string | null }>(
    `select count(*)::int as count, min(id) filter (where url = $3) as same_url_id
     from webhook_endpoints where account_id = $1 and environment = $2`,
    [scope.accountId, scope.environment, url],
  );
  return { count: rows[0].count, sameUrlId: rows[0].same_url_id };
}

export async function findEndpoint(db: Queryable, scope: Scope, id: string, forUpdate = false): Promise<WebhookEndpointRow | null> {
  const { rows } = await db.query<WebhookEndpointRow>(
    `select ${COLUMNS} from webhook_endpoints where id = $1 and account_id = $2 and environment = $3 ${forUpdate ? 'for update' : ''}`,
    [id, scope.accountId, scope.environment],
  );
  return rows[0] ?? null;
}

export async function listEndpoints(db: Queryable, scope: Scope): Promise<WebhookEndpointRow[]> {
  const { rows } = await db.query<WebhookEndpointRow>(
    `select ${COLUMNS} from webhook_endpoints where account_id = $1 and environment = $2 order by created_at, id`,
    [scope.accountId, scope.environment],
  );
  return rows;
}

export interface EndpointEdit {
  url?: string;
  description?: string;
  enabledEvents?: string[];
  status?: 'enabled' | 'disabled';
}

/** Re-enabling clears the reason and restarts the failure clock. */
export async function updateEndpoint(db: Queryable, id: string, e: EndpointEdit): Promise<WebhookEndpointRow> {
  const { rows } = await db.query<WebhookEndpointRow>(
    `update webhook_endpoints set
       url = coalesce($2, url),
       description = coalesce($3, description),
       enabled_events = coalesce($4, enabled_events),
       status = coalesce($5, status),
       disabled_reason = case when $5 is null then disabled_reason when $5 = 'enabled' then null else 'disabled by the merchant' end,
       failing_since = case when $5 = 'enabled' then null else failing_since end,
       updated_at = clock_timestamp()
     where id = $1 returning ${COLUMNS}`,
    [id, e.url ?? null, e.description ?? null, e.enabledEvents ?? null, e.status ?? null],
  );
  return rows[0];
}

export async function deleteEndpoint(db: Queryable, scope: Scope, id: string): Promise<boolean> {
  const { rowCount } = await db.query('delete from webhook_endpoints where id = $1 and account_id = $2 and environment = $3', [
    id, scope.accountId, scope.environment,
  ]);
  return rowCount === 1;
}

/** The new secret signs from now on; the current one keeps signing beside it until `overlapMs` from now. */
export async function rotateSecret(db: Queryable, id: string, secret: string, overlapMs: number): Promise<WebhookEndpointRow> {
  const { rows } = await db.query<WebhookEndpointRow>(
    `update webhook_endpoints set previous_secret = secret, secret = $2,
       previous_secret_expires_at = clock_timestamp() + make_interval(secs => $3::double precision / 1000),
       updated_at = clock_timestamp()
     where id = $1 returning ${COLUMNS}`,
    [id, secret, overlapMs],
  );
  return rows[0];
}

/** Enabled endpoints of the event's account and environment that existed when it happened. */
export async function endpointsForEvent(db: Queryable, eventId: string): Promise<{ id: string; enabled_events: string[] }[]> {
  const { rows } = await db.query<{ id: string; enabled_events: string[] }>(
    `select w.id, w.enabled_events from events e
     join webhook_endpoints w on w.account_id = e.account_id and w.environment = e.environment
     where e.id = $1 and w.status = 'enabled' and w.created_at <= e.created_at`,
    [eventId],
  );
  return rows;
}

export async function disableEndpoint(db: Queryable, id: string, reason: string): Promise<void> {
  await db.query(
    `update webhook_endpoints set status = 'disabled', disabled_reason = $2, updated_at = clock_timestamp()
     where id = $1 and status = 'enabled'`,
    [id, reason],
  );
}
