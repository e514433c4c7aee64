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

export type CadenceVerdict =
  | { ok: true; cadence: Cadence; intervalSeconds: number | null }
  | { ok: false; message: string };

export function resolveCadence(cadence: Cadence | undefined, intervalSeconds: number | undefined): CadenceVerdict {
  const c: Cadence = cadence ?? (intervalSeconds === undefined ? 'one_time' : 'custom');
  if (c === 'one_time') {
    if (intervalSeconds !== undefined) return { ok: false, message: 'A one_time price has no interval_seconds.' };
    return { ok: true, cadence: c, intervalSeconds: null };
  }
  if (c === 'custom') {
    if (intervalSeconds === undefined) return { ok: false, message: 'A custom cadence needs interval_seconds.' };
    return { ok: true, cadence: c, intervalSeconds };
  }
  const expected = CADENCE_SECONDS[c];
  if (intervalSeconds !== undefined && intervalSeconds !== expected) {
    return { ok: false, message: `cadence ${c} means interval_seconds ${expected}, not ${intervalSeconds}.` };
  }
  return { ok: true, cadence: c, intervalSeconds: expected };
}
