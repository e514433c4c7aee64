import { newId } from '../domain/ids.js';
import type { Scope } from './invoices.js';
import type { Queryable } from './pool.js';

/** The customer of this email in the scope, created on first use; a given name or zone updates it. */
export async function upsertCustomer(
  db: Queryable,
  scope: Scope,
  email: string,
  name: string | null,
  timeZone: string | null,
): Promise<{ id: string }> {
  const { rows } = await db.query<{ id: string }>(
    `insert into customers (id, account_id, environment, email, name, time_zone)
     values ($1, $2, $3, $4, $5, $6)
     on conflict (account_id, environment, lower(email)) do update
       set name = coalesce(excluded.name, customers.name),
           time_zone = coalesce(excluded.time_zone, customers.time_zone),
           updated_at = now()
     returning id`,
    [newId('cus'), scope.accountId, scope.environment, email, name, timeZone],
  );
  return rows[0];
}

/** The customer's own IANA zone, null when none was given (the account's applies then). */
export async function findCustomerTimeZone(db: Queryable, customerId: string): Promise<string | null> {
  const { rows } = await db.query<{ time_zone: string | null }>('select time_zone from customers where id = $1', [customerId]);
  return rows[0]?.time_zone ?? null;
}
