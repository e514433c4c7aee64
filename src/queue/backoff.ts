// Retry timing for email jobs: exponential from 1 s, capped at 10 min, so an SMTP outage of
// hours is ridden out by a bounded number of attempts instead of exhausting them in minutes.
import type { AdvancedOptions } from 'bullmq';

export const CAPPED_BACKOFF = 'capped-exponential';
const FIRST_DELAY_MS = 1_000;
const MAX_DELAY_MS = 10 * 60_000;

export function cappedBackoffDelay(attemptsMade: number): number {
  return Math.min(FIRST_DELAY_MS * 2 ** Math.max(0, attemptsMade - 1), MAX_DELAY_MS);
}

/** Worker `settings` that know the CAPPED_BACKOFF type (BullMQ asks them for custom types only). */
export const backoffSettings: Pick<AdvancedOptions, 'backoffStrategy'> = {
  backoffStrategy: (attemptsMade: number) => cappedBackoffDelay(attemptsMade),
};
