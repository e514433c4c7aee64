// A price's cadence and its interval in seconds. A month is 30 days and a year 365 for the
// interval the on-chain contract enforces; calendar billing is the subscription engine's job.

export const CADENCE_SECONDS = {
  daily: 86_400,
  weekly: 604_800,
  monthly: 2_592_000,
  yearly: 31_536_000,
} as const;

/** Every cadence a price may have, in the API's order. */
export const CADENCES = ['one_time', 'daily', 'weekly', 'monthly', 'yearly', 'custom'] as const satisfies readonly ('one_time' | keyof typeof CADENCE_SECONDS | 'custom')[];
export type Cadence = (typeof CADENCES)[number];

import type { Environment } from './environment.js';

/**
 * The shortest custom interval a price may have: in the sandbox 10 seconds, so that a period can
 * be watched happening; in live an hour, since every period costs a charge transaction's gas and
 * makes an invoice and a receipt email (docs/subscriptions.md).
 */
export const MIN_INTERVAL_SECONDS: Record<Environment, number> = { sandbox: 10, live: 3600 };

export type CadenceVerdict =
  | { ok: true; cadence: Cadence; intervalSeconds: number | null }
  | { ok: false; code: 'cadence_interval_mismatch' | 'validation_failed'; message: string };

export function resolveCadence(cadence: Cadence | undefined, intervalSeconds: number | undefined, environment: Environment): CadenceVerdict {
  const c: Cadence = cadence ?? (intervalSeconds === undefined ? 'one_time' : 'custom');
  if (c === 'one_time') {
    if (intervalSeconds !== undefined) return { ok: false, code: 'cadence_interval_mismatch', message: 'A one_time price has no interval_seconds.' };
    return { ok: true, cadence: c, intervalSeconds: null };
  }
  if (c === 'custom') {
    if (intervalSeconds === undefined) return { ok: false, code: 'cadence_interval_mismatch', message: 'A custom cadence needs interval_seconds.' };
    const min = MIN_INTERVAL_SECONDS[environment];
    if (intervalSeconds < min) return { ok: false, code: 'validation_failed', message: `interval_seconds must be at least ${min} in ${environment} (${MIN_INTERVAL_SECONDS.sandbox} in the sandbox, ${MIN_INTERVAL_SECONDS.live} in live).` };
    return { ok: true, cadence: c, intervalSeconds };
  }
  const expected = CADENCE_SECONDS[c];
  if (intervalSeconds !== undefined && intervalSeconds !== expected) {
    return { ok: false, code: 'cadence_interval_mismatch', message: `cadence ${c} means interval_seconds ${expected}, not ${intervalSeconds}.` };
  }
  return { ok: true, cadence: c, intervalSeconds: expected };
}
