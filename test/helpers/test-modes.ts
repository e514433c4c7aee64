// Whether the suite also runs its send and reminder end-to-end files on a local Redis Cluster.
// Read by vitest.config.ts, to add the `cluster` project (whose own global setup starts it).
// TEST_REDIS_CLUSTER: `auto` (default: when `redis-server` is on the PATH), `off`, or `required`
// (CI: fail rather than skip when no cluster can be started).
import { redisServerAvailable } from './redis-cluster.js';

export function clusterTestsWanted(env: NodeJS.ProcessEnv = process.env): boolean {
  const mode = env.TEST_REDIS_CLUSTER || 'auto';
  if (mode === 'off') return false;
  const available = redisServerAvailable();
  if (mode === 'required' && !available) throw new Error('TEST_REDIS_CLUSTER=required but no redis-server binary is on the PATH');
  if (mode !== 'auto' && mode !== 'required') throw new Error(`TEST_REDIS_CLUSTER must be auto, off or required, got "${mode}"`);
  if (!available) process.stdout.write('tests: no redis-server on the PATH: the Redis Cluster runs are skipped\n');
  return available;
}
