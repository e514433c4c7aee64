// A subscription's rules as plain functions (docs/subscriptions.md "Lifecycle" and "Dunning"):
// its statuses and transitions, period arithmetic, the dunning schedule and what follows a failed
// attempt, the failure codes and the words a customer reads for each. No I/O: the worker
// (jobs/subscriptions-charge.ts) and the database triggers (migration 1700000002050) apply them.
import { Decimal } from 'decimal.js';
import { Duration } from 'luxon';

/** Every subscription status; the SQL check constraint holds the same list (a test compares them). */
export const SUBSCRIPTION_STATUSES = ['active', 'past_due', 'canceled', 'ended'] as const;
export type SubscriptionStatus = (typeof SUBSCRIPTION_STATUSES)[number];

/** What happens to a subscription; each is written by exactly one party (see TRANSITIONS' comments). */
export type SubscriptionEvent = 'attempt_failed' | 'period_paid' | 'dunning_exhausted_cancel' | 'dunning_exhausted_keep' | 'cancel' | 'end';

/**
 * Where each event leads from each status; absent means nothing changes (the event is refused or
 * moot). The SQL writers guard the same transitions: the worker's conditional updates
 * (src/db/subscriptions.ts), cancelSubscription, and the advance trigger on invoices.
 */
export const SUBSCRIPTION_TRANSITIONS: Readonly<Record<SubscriptionEvent, Partial<Record<SubscriptionStatus, SubscriptionStatus>>>> = {
  // A charge that would fail or failed (the worker): the first failure makes it past_due.
  attempt_failed: { active: 'past_due', past_due: 'past_due' },
  // A period invoice turns paid (the advance trigger): back to active once no other period
  // invoice is unpaid with a failed attempt (else it stays past_due).
  period_paid: { active: 'active', past_due: 'active' },
  // The last attempt failed, DUNNING_FINAL_ACTION=cancel (the worker; the relayer then cancels on-chain).
  dunning_exhausted_cancel: { past_due: 'canceled' },
  // The last attempt failed, DUNNING_FINAL_ACTION=keep: the next period is billed, still past_due.
  dunning_exhausted_keep: { past_due: 'past_due' },
  // The merchant over the API, or the customer / payee on-chain (the watcher).
  cancel: { active: 'canceled', past_due: 'canceled' },
  // ends_at passed (the worker).
  end: { active: 'ended', past_due: 'ended' },
};

export function subscriptionNextStatus(status: SubscriptionStatus, event: SubscriptionEvent): SubscriptionStatus | null {
  return SUBSCRIPTION_TRANSITIONS[event][status] ?? null;
}

/** Whether the worker still bills this subscription's periods. */
export function isRunning(status: SubscriptionStatus): boolean {
  return status === 'active' || status === 'past_due';
}

// --- periods ---

export interface PeriodClock {
  startedAt: Date;
  intervalSeconds: number;
}

/** Period k (k >= 0) begins at startedAt + k x interval. */
export function periodStart(s: PeriodClock, k: number): Date {
  return new Date(s.startedAt.getTime() + k * s.intervalSeconds * 1000);
}

/** Period k ends where period k + 1 begins. */
export function periodEnd(s: PeriodClock, k: number): Date {
  return periodStart(s, k + 1);
}

/** The index of the period that begins at `at` (next_charge_at); rounded, since both are whole seconds apart. */
export function periodIndexAt(s: PeriodClock, at: Date): number {
  return Math.max(0, Math.round((at.getTime() - s.startedAt.getTime()) / (s.intervalSeconds * 1000)));
}

/** What the worker does with the period invoice it is about to charge. */
export type PeriodChargeVerdict = 'settled' | 'payment_pending' | 'charge';

/** A period invoice as the charge decision reads it; amounts atomic. */
export interface PeriodInvoiceState {
  status: string;
  amountAtomic: bigint;
  paidAtomic: bigint;
  /** What payments of it seen on the chain and not yet confirmed moved (received + fee received). */
  pendingAtomic: bigint;
}

/**
 * Whether a period invoice is charged now. Paid or voided: settled, the next period follows.
 * Payments of it seen on the chain and not yet confirmed that would settle it (the customer paying
 * it by wallet, as the failed-attempt email offers, or the relayer's own charge waiting for its
 * confirmations): not charged until they are confirmed or gone, since the contract always pulls
 * the whole period's amount and the customer would pay the period twice. A pending payment that
 * would not settle it (dust anyone can send to its reference) holds nothing up.
 */
export function periodChargeVerdict(inv: PeriodInvoiceState): PeriodChargeVerdict {
  if (inv.status === 'paid' || inv.status === 'void') return 'settled';
  return inv.pendingAtomic > 0n && inv.paidAtomic + inv.pendingAtomic >= inv.amountAtomic ? 'payment_pending' : 'charge';
}

// --- dunning ---

/** DUNNING_SCHEDULE's default: retries 1, 3, 5 and 7 days after the period's due time. */
export const DEFAULT_DUNNING_SCHEDULE = 'P1D,P3D,P5D,P7D';
export const DUNNING_FINAL_ACTIONS = ['cancel', 'keep'] as const;
export type DunningFinalAction = (typeof DUNNING_FINAL_ACTIONS)[number];

/**
 * DUNNING_SCHEDULE: comma-separated ISO-8601 durations after the due time (the period's start),
 * strictly increasing, at least one (sandbox may use seconds: `PT10S,PT30S`).
 */
export function parseDurationList(text: string): { ok: true; value: Duration[] } | { ok: false; message: string } {
  const parts = text
    .split(',')
    .map((p) => p.trim())
    .filter((p) => p !== '');
  if (parts.length === 0) return { ok: false, message: 'must list at least one ISO-8601 duration, such as P1D,P3D' };
  const value: Duration[] = [];
  for (const part of parts) {
    const d = Duration.fromISO(part);
    if (!d.isValid || d.toMillis() <= 0) return { ok: false, message: `must be comma-separated positive ISO-8601 durations such as P1D,P3D or PT10S, got "${part}"` };
    const last = value.at(-1);
    if (last && d.toMillis() <= last.toMillis()) return { ok: false, message: `must be increasing (each retry later than the one before), got "${part}" after "${last.toISO()}"` };
    value.push(d);
  }
  return { ok: true, value };
}

/**
 * When the attempt after a failed one happens: the first entry of the schedule, counted from the
 * due time, that is after `now` and at or after the entry the failed attempt number reached
 * (attempt n >= 1 failed -> entries n-1 onward). Entries passed while the service was down are not
 * caught up (no burst of attempts and emails). Null: that was the last attempt.
 */
export function nextAttemptAt(dueAt: Date, schedule: readonly Duration[], failedAttempts: number, now: Date): Date | null {
  for (const d of schedule.slice(Math.max(0, failedAttempts - 1))) {
    const at = new Date(dueAt.getTime() + d.toMillis());
    if (at.getTime() > now.getTime()) return at;
  }
  return null;
}

// --- failures ---

/** Why a charge failed that the customer can fix or must know of (counted as attempts). */
export const FAILURE_CODES = ['insufficient_balance', 'insufficient_allowance', 'subscription_canceled', 'subscription_ended'] as const;
export type FailureCode = (typeof FAILURE_CODES)[number];

export function isFailureCode(code: string): code is FailureCode {
  return (FAILURE_CODES as readonly string[]).includes(code);
}

export interface FailureFacts {
  code: FailureCode;
  /** What the charge is short of (atomic units), when the chain said. */
  shortAtomic?: bigint;
  /** A period's amount in atomic units, and the token's decimals and symbol. */
  amountAtomic: bigint;
  decimals: number;
  currency: string;
}

/** Atomic units as a decimal number of tokens (`6500000`, 6 -> `6.50`): at least two decimals. */
export function formatTokenAmount(atomic: bigint, decimals: number): string {
  const value = new Decimal(atomic.toString()).div(new Decimal(10).pow(decimals));
  const places = Math.max(2, value.decimalPlaces());
  return value.toFixed(Math.min(places, decimals));
}

/** The failure in words a customer understands (the invoice's failure_message, the email's line): what failed and by how much. */
export function failureMessage(f: FailureFacts): string {
  const need = `${formatTokenAmount(f.amountAtomic, f.decimals)} ${f.currency}`;
  const short = f.shortAtomic !== undefined && f.shortAtomic > 0n ? `${formatTokenAmount(f.shortAtomic, f.decimals)} ${f.currency}` : null;
  switch (f.code) {
    case 'insufficient_balance':
      return short
        ? `Your wallet's balance is ${short} short of this period's ${need}. Add at least ${short} to the wallet, or pay this invoice from another wallet.`
        : `Your wallet's balance is below this period's ${need}. Add funds to the wallet, or pay this invoice from another wallet.`;
    case 'insufficient_allowance':
      return short
        ? `The allowance your wallet gave the subscription contract is ${short} short of this period's ${need}. Approve at least ${need} again, or pay this invoice by wallet.`
        : `Your wallet no longer allows the subscription contract to take this period's ${need}. Approve it again, or pay this invoice by wallet.`;
    case 'subscription_canceled':
      return `The subscription was canceled on-chain, so this period's ${need} cannot be charged. You can still pay this invoice by wallet.`;
    case 'subscription_ended':
      return `The subscription has reached its end date, so this period's ${need} cannot be charged.`;
  }
}
