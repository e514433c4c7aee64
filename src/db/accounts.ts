import type { Queryable } from './pool.js';

export interface AccountRow {
  id: string;
  name: string;
  email: string | null;
  time_zone: string;
  platform_fee_bps: number;
  /** The merchant's own address that payments go to (0x + 40 hex), if published. */
  settlement_address?: string | null;
}

export async function findAccount(db: Queryable, id: string): Promise<AccountRow | null> {
  const { rows } = await db.query<AccountRow>(
    'select id, name, email, time_zone, platform_fee_bps, settlement_address from accounts where id = $1',
    [id],
  );
  return rows[0] ?? null;
}

/** Sets the account's settlement address unless it already has one. */
export async function ensureSettlementAddress(db: Queryable, accountId: string, address: string): Promise<void> {
  await db.query('update accounts set settlement_address = coalesce(settlement_address, $2) where id = $1', [accountId, address]);
}

export async function upsertAccount(db: Queryable, a: AccountRow): Promise<AccountRow> {
  const { rows } = await db.query<AccountRow>(
    `insert into accounts (id, name, email, time_zone, platform_fee_bps, settlement_address) values ($1, $2, $3, $4, $5, $6)
     on conflict (id) do update set name = excluded.name, email = excluded.email, time_zone = excluded.time_zone,
       settlement_address = coalesce(excluded.settlement_address, accounts.settlement_address), updated_at = now()
     returning id, name, email, time_zone, platform_fee_bps, settlement_address`,
    [a.id, a.name, a.email, a.time_zone, a.platform_fee_bps, a.settlement_address ?? null],
  );
  return rows[0];
}
