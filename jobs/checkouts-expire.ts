// `checkouts.expire`: on its own job scheduler (every CHECKOUT_EXPIRE_EVERY). Voids the payment
// links' checkouts that are past CHECKOUT_EXPIRY with no payment seen: an anonymous visitor made
// them, and an unpaid one must not stay an open invoice of the merchant for good.
import { voidExpiredCheckouts } from '../src/db/checkouts.js';
import type { JobHandler } from '../src/queue/dispatcher.js';
import type { JobContext } from '../src/queue/job-context.js';

/** Checkouts voided per statement; a run keeps going until none is left. */
const BATCH = 500;

export const checkoutsExpire: JobHandler<Record<string, never>, JobContext> = async (_payload, ctx) => {
  let voided = 0;
  for (;;) {
    const ids = await voidExpiredCheckouts(ctx.pool, BATCH);
    voided += ids.length;
    if (ids.length < BATCH) break;
  }
  if (voided > 0) ctx.log.info({ voided }, 'expired checkouts voided');
  return `voided ${voided}`;
};
