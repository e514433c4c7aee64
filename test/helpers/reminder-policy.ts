/**
 * A reminder policy in seconds, for the end-to-end reminder tests: slots at due-3s, due-2s,
 * due-1s, then due+1s, due+2s, due+3s. Each test file adds its own RECONCILE_EVERY.
 */
export const SECOND_SIZED_REMINDERS = {
  REMINDERS_BEFORE_START: 'PT3S',
  REMINDERS_BEFORE_EVERY: 'PT1S',
  REMINDERS_AFTER_START: 'PT1S',
  REMINDERS_AFTER_EVERY: 'PT1S',
  REMINDERS_AFTER_MAX: '3',
} as const;
