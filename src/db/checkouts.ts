// A payment link's checkouts (invoices made by POST /pay/<link id>/checkout): their mark and
// expiry, the counts their limits are checked against, and the voiding of expired ones.
import type { Queryable } from './pool.js';
import { lockScopeFamily, type Scope } from './scope.js';

/** Marks a just-made invoice as a checkout that expires `expiresInMs` from now. */
export async function markCheckout(db: Queryable, invoiceId: string, expiresInMs: number): Promise<void> {
  await db.query(`update invoices set checkout_expires_at = clock_timestamp() + make_interval(secs => $2::double precision / 1000) where id = $1`, [
    invoiceId,
    expiresInMs,
  ]);
}

export interface RecentCheckouts {
  /** Unpaid checkouts of the link made since `since`. */
  link: number;
  /** Unpaid checkouts of the scope (any of its links) for that email, made since `since`. */
  email: number;
}

/**
 * How many checkouts not paid in full (open or overdue, whatever part of them was paid: a payment of
 * one atomic unit must not free a slot; not expired) the link and the email
 * have had since `since`. Takes a transaction-scoped lock on (scope, email) first, so two checkouts
 * for one email on two links of the account cannot both pass the count; the caller already holds
 * the link's row lock.
 */
export async function countRecentCheckouts(db: Queryable, scope: Scope, linkId: string, email: string, since: Date): Promise<RecentCheckouts> {
  await lockScopeFamily(db, `checkout-email:${email.toLowerCase()}`, scope);
  const { rows } = await db.query<RecentCheckouts>(
    `select
       (select count(*)::int from invoices
         where payment_link_id = $3 and checkout_expires_at is not null and status in ('open', 'overdue')
           and created_at >= $5) as link,
       (select count(*)::int from invoices i join customers c on c.id = i.customer_id
         where c.account_id = $1 and c.environment = $2 and lower(c.email) = lower($4)
           and i.checkout_expires_at is not null and i.status in ('open', 'overdue')
           and i.created_at >= $5) as email`,
    [scope.accountId, scope.environment, linkId, email, since],
  );
  return rows[0];
}

/**
 * Voids up to `limit` checkouts past their expiry that are still open with no payment seen (no
 * pending or confirmed payment row, nothing applied); returns their ids. A checkout with any
 * payment is the merchant's to settle and is never voided here. The status change fires the
 * usual triggers (invoice.voided, the reminders' NOTIFY).
 */
export async function voidExpiredCheckouts(db: Queryable, limit: number): Promise<string[]> {
  const { rows } = await db.query<{ id: string }>(
    `update invoices i set status = 'void', voided_at = clock_timestamp(), updated_at = clock_timestamp()
     where i.id in (
       select e.id from invoices e
       where e.checkout_expires_at is not null and e.checkout_expires_at <= clock_timestamp() and e.status in ('open', 'overdue')
         and e.amount_paid_atomic = 0
         and not exists (select 1 from payments p where p.invoice_id = e.id and p.status <> 'removed')
       order by e.checkout_expires_at
       limit $1
       for update skip locked)
       and i.status in ('open', 'overdue') and i.amount_paid_atomic = 0
     returning i.id`,
    [limit],
  );
  return rows.map((r) => r.id);
}
