import { newId } from '../domain/ids.js';
import type { Scope } from './invoices.js';
import type { Queryable } from './pool.js';

/**
 * The customer of this email in the scope, created on first use; a given name, zone or locale
 * updates it. Returns the stored locale, the default of the customer's next invoices.
 */
export async function upsertCustomer(
  db: Queryable,
  scope: Scope,
  email: string,
  name: string | null,
  timeZone: string | null,
  locale: string | null = null,
): Promise<{ id: string; locale: string | null }> {
  const { rows } = await db.query<{ id: string; locale: string | null }>(
    `insert into customers (id, account_id, environment, email, name, time_zone, locale)
     values ($1, $2, $3, $4, $5, $6, $7)
     on conflict (account_id, environment, lower(email)) do update
       set name = coalesce(excluded.name, customers.name),
           time_zone = coalesce(excluded.time_zone, customers.time_zone),
           locale = coalesce(excluded.locale, customers.locale),
           updated_at = now()
     returning id, locale`,
    [newId('cus'), scope.accountId, scope.environment, email, name, timeZone, locale],
  );
  return rows[0];
}

/** A customer told us their language (an invoice edit): it becomes their default. */
export async function setCustomerLocale(db: Queryable, customerId: string, locale: string): Promise<void> {
  await db.query('update customers set locale = $2, updated_at = now() where id = $1', [customerId, locale]);
}

/** The customer's own IANA zone, null when none was given (the account's applies then). */
export async function findCustomerTimeZone(db: Queryable, customerId: string): Promise<string | null> {
  const { rows } = await db.query<{ time_zone: string | null }>('select time_zone from customers where id = $1', [customerId]);
  return rows[0]?.time_zone ?? null;
}
