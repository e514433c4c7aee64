// The backend comparison: one worker on the Postgres queue backend beside one on Redis, same run.
import { fmt } from '../support.js';
import type { PassResult } from './pass.js';
import { maxOf } from './ratio.js';

/** Per worker concurrency where both backends ran: Postgres >= 0.8x Redis in sends/s. */
export function backendTargets(results: PassResult[], concurrencies: number[]): string[] {
  const out: string[] = [];
  for (const c of concurrencies) {
    const pgOne = maxOf(results, 'postgres', 1, c);
    const redisOne = maxOf(results, 'redis', 1, c);
    if (!pgOne || !redisOne) continue;
    const x = pgOne.perSecond / redisOne.perSecond;
    out.push(
      `  c${c}: Postgres backend ${fmt(pgOne.perSecond)}/s vs Redis backend ${fmt(redisOne.perSecond)}/s with one worker = ${fmt(x, 2)}x vs >= 0.8x: ${x >= 0.8 ? 'met' : 'MISSED'} (worker CPU ms per invoice ${fmt(pgOne.workerCpuMsPerMsg, 2)} vs ${fmt(redisOne.workerCpuMsPerMsg, 2)}; Postgres ms per invoice ${fmt(pgOne.postgresCpuMsPerMsg, 2)} vs ${fmt(redisOne.postgresCpuMsPerMsg, 2)})`,
    );
  }
  return out;
}
