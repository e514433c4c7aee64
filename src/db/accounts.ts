import type { Queryable } from './pool.js';
import type { Scope } from './scope.js';

export interface AccountRow {
  id: string;
  name: string;
  email: string | null;
  time_zone: string;
  platform_fee_bps: number;
}

export async function findAccount(db: Queryable, id: string): Promise<AccountRow | null> {
  const { rows } = await db.query<AccountRow>('select id, name, email, time_zone, platform_fee_bps from accounts where id = $1', [id]);
  return rows[0] ?? null;
}

export async function upsertAccount(db: Queryable, a: AccountRow): Promise<AccountRow> {
  const { rows } = await db.query<AccountRow>(
    `insert into accounts (id, name, email, time_zone, platform_fee_bps) values ($1, $2, $3, $4, $5)
     on conflict (id) do update set name = excluded.name, email = excluded.email, time_zone = excluded.time_zone, updated_at = now()
     returning id, name, email, time_zone, platform_fee_bps`,
    [a.id, a.name, a.email, a.time_zone, a.platform_fee_bps],
  );
  return rows[0];
}

/** The account as GET /v1/account shows it: its settlement address in the key's environment. */
export interface AccountView extends AccountRow {
  settlement_address: string | null;
  settlement_address_updated_at: Date | null;
}

export async function findAccountView(db: Queryable, scope: Scope): Promise<AccountView | null> {
  const { rows } = await db.query<AccountView>(
    `select a.id, a.name, a.email, a.time_zone, a.platform_fee_bps, s.address as settlement_address, s.updated_at as settlement_address_updated_at
     from accounts a left join settlement_addresses s on s.account_id = a.id and s.environment = $2
     where a.id = $1`,
    [scope.accountId, scope.environment],
  );
  return rows[0] ?? null;
}

/**
 * Where the scope's payments go (checksummed), or null when the merchant has set none. Share-locked
 * until the caller's transaction ends: what it issues to the address commits before the merchant
 * can move off it. Read unlocked, a send could issue to an address the merchant had just left and
 * another tenant just claimed (neither its row nor an invoice named it yet), and that tenant's
 * wallet would pay this tenant's invoice.
 */
export async function findSettlementAddress(db: Queryable, scope: Scope): Promise<string | null> {
  const { rows } = await db.query<{ address: string }>('select address from settlement_addresses where account_id = $1 and environment = $2 for share', [
    scope.accountId, scope.environment,
  ]);
  return rows[0]?.address ?? null;
}

/**
 * Whether another account of the environment holds this address: as its settlement address, or as
 * the address any invoice of it was ever sent to (a former address stays that account's: payments to
 * it, and the payers and amounts they show, are never another tenant's to see). Takes a transaction lock on the address first, so
 * two accounts claiming it at once are serialised (call inside the transaction that sets it).
 */
export async function addressHeldByAnother(db: Queryable, scope: Scope, address: string): Promise<boolean> {
  await db.query(`select pg_advisory_xact_lock(hashtextextended('settlement:' || $1 || ':' || lower($2), 0))`, [scope.environment, address]);
  const { rows } = await db.query<{ held: boolean }>(
    `select exists (select 1 from settlement_addresses where environment = $2 and lower(address) = lower($3) and account_id <> $1)
         or exists (select 1 from invoices where environment = $2 and lower(settlement_address) = lower($3) and account_id <> $1) as held`,
    [scope.accountId, scope.environment, address],
  );
  return rows[0].held;
}

/** Sets (or replaces) the scope's settlement address; `onlyIfUnset` keeps one already set. */
export async function setSettlementAddress(db: Queryable, scope: Scope, address: string, onlyIfUnset = false): Promise<void> {
  await db.query(
    `insert into settlement_addresses (account_id, environment, address) values ($1, $2, $3)
     on conflict (account_id, environment) do update set address = excluded.address, updated_at = now()
       where not $4 and settlement_addresses.address is distinct from excluded.address`,
    [scope.accountId, scope.environment, address, onlyIfUnset],
  );
}
