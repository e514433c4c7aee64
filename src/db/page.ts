// Keyset pagination shared by the list endpoints: newest first by (created_at, id), a cursor
// being the id of an object of the list. An existing row's key never changes, so a client paging
// while new rows are inserted sees every row that existed when it started exactly once (new rows
// sort before the first page and are simply not reached).
import type { Scope } from './scope.js';
import type { QueryResultRow } from 'pg';
import type { Queryable } from './pool.js';

export interface PageRequest {
  /** 1..100, checked by the route schema. */
  limit: number;
  /** Id of an object: the page holds the objects listed after it (older ones). */
  startingAfter?: string;
  /** Id of an object: the page holds the objects listed before it (newer ones). */
  endingBefore?: string;
}

export type PageResult<T> = { ok: true; rows: T[]; hasMore: boolean } | { ok: false; missingCursor: 'starting_after' | 'ending_before' };

/** The tables that are listed; each has account_id, environment, created_at and id. */
export type ListedTable = 'invoices' | 'products' | 'credentials' | 'events' | 'payments' | 'subscriptions';

export interface ListQuery {
  table: ListedTable;
  /**
   * `select <columns> from <table> <alias> [joins]`, without where/order/limit. The alias names
   * the listed table in the keyset and scope conditions.
   */
  select: string;
  alias: string;
  /** Extra conditions, each a SQL boolean using $5, $6... for `values` in order. */
  filters?: string[];
  values?: unknown[];
  /**
   * What makes a row one of this list at all, for good (a subscription's invoices): a condition of
   * the list that the cursor must meet too. Filters that a row can leave (a status) are not: a
   * client paging while its cursor's invoice turns paid keeps its place.
   */
  member?: { column: 'subscription_id'; value: string };
}

/**
 * One page of `q` in `scope`. Parameters: $1 account, $2 environment, $3 the cursor's id (or
 * null), $4 limit + 1 (the extra row answers has_more), then the filters' values, then the
 * member's value.
 */
export async function listPage<T extends QueryResultRow>(db: Queryable, scope: Scope, q: ListQuery, page: PageRequest): Promise<PageResult<T>> {
  const cursorId = page.startingAfter ?? page.endingBefore ?? null;
  if (cursorId !== null) {
    const { rowCount } = await db.query(
      `select 1 from ${q.table} where id = $1 and account_id = $2 and environment = $3${q.member ? ` and ${q.member.column} = $4` : ''}`,
      [cursorId, scope.accountId, scope.environment, ...(q.member ? [q.member.value] : [])],
    );
    if (!rowCount) return { ok: false, missingCursor: page.startingAfter !== undefined ? 'starting_after' : 'ending_before' };
  }
  const a = q.alias;
  // ending_before walks towards newer rows (ascending) and the page is reversed afterwards, so
  // it is the `limit` rows right before the cursor, not the newest ones.
  const backwards = page.endingBefore !== undefined;
  const op = backwards ? '>' : '<';
  const order = backwards ? 'asc' : 'desc';
  const values = q.values ?? [];
  const conditions = [...(q.filters ?? []), ...(q.member ? [`${a}.${q.member.column} = $${5 + values.length}`] : [])];
  const filters = conditions.map((f) => `and (${f})`).join(' ');
  // The cursor's key is read inside the statement: created_at has microseconds, a JS Date only
  // milliseconds, so a round trip through JS would misplace the cursor.
  const { rows } = await db.query<T>(
    `${q.select}
     where ${a}.account_id = $1 and ${a}.environment = $2
       and ($3::text is null or (${a}.created_at, ${a}.id) ${op}
         (select k.created_at, k.id from ${q.table} k where k.id = $3 and k.account_id = $1 and k.environment = $2))
       ${filters}
     order by ${a}.created_at ${order}, ${a}.id ${order}
     limit $4`,
    [scope.accountId, scope.environment, cursorId, page.limit + 1, ...values, ...(q.member ? [q.member.value] : [])],
  );
  const hasMore = rows.length > page.limit;
  const pageRows = rows.slice(0, page.limit);
  if (backwards) pageRows.reverse();
  return { ok: true, rows: pageRows, hasMore };
}
