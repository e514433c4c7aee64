import type { Queryable } from './pool.js';

export interface AccountRow {
  id: string;
  name: string;
  email: string | null;
  time_zone: string;
  platform_fee_bps: number;
}

export async function findAccount(db: Queryable, id: string): Promise<AccountRow | null> {
  const { rows } = await db.query<AccountRow>(
    'select id, name, email, time_zone, platform_fee_bps from accounts where id = $1',
    [id],
  );
  return rows[0] ?? null;
}

export async function upsertAccount(db: Queryable, a: AccountRow): Promise<AccountRow> {
  const { rows } = await db.query<AccountRow>(
    `insert into accounts (id, name, email, time_zone, platform_fee_bps) values ($1, $2, $3, $4, $5)
     on conflict (id) do update set name = excluded.name, email = excluded.email, time_zone = excluded.time_zone,
       updated_at = now()
     returning id, name, email, time_zone, platform_fee_bps`,
    [a.id, a.name, a.email, a.time_zone, a.platform_fee_bps],
  );
  return rows[0];
}
