import { defineConfig } from 'vitest/config';
import { planServices, ServicesUnavailable } from './test/helpers/services.js';
import { clusterTestsWanted } from './test/helpers/test-modes.js';

// The end-to-end files that run on both queue backends: the whole suite runs on the Postgres
// backend (the default without Redis), and these once more on Redis when one can be had.
const BOTH_BACKENDS = [
  'test/integration/send-pipeline.test.ts',
  'test/integration/reminders.test.ts',
  'test/integration/reminders-recovery.test.ts',
  'test/integration/reminder-schedulers.test.ts',
  'test/integration/ops.test.ts',
  'test/integration/deployment-isolation.test.ts',
  'test/integration/reminder-shards.test.ts',
  'test/integration/chain-payments.test.ts',
  'test/integration/subscription-charges.test.ts',
  'test/integration/subscription-e2e.test.ts',
  'test/integration/subscription-crash.test.ts',
  'test/integration/subscription-reorg.test.ts',
];

// The send and reminder end-to-end files run a third time, on the Redis backend over a throwaway
// 3-master Redis Cluster (started by the cluster project's own global setup, so only when one of
// its files runs, and when `redis-server` is on the PATH; TEST_REDIS_CLUSTER=off skips it,
// =required makes its absence an error).
// (reminders-recovery.test.ts stays on single Redis: its Redis-loss simulation deletes keys while
// the reconciler, slower over 12 shards, may be restoring them, and it flakes on a loaded machine.)
const CLUSTER_FILES = [
  'test/integration/send-pipeline.test.ts',
  'test/integration/reminders.test.ts',
  'test/integration/reminder-shards.test.ts',
  'test/integration/redis-cluster.test.ts',
  'test/integration/chain-payments.test.ts',
];
// Only meaningful on a cluster: the harness itself and the key layout there.
const CLUSTER_ONLY = ['test/integration/redis-cluster.test.ts'];

// Where Postgres and Redis come from (test/helpers/services.ts: TEST_DATABASE_URL / TEST_REDIS_URL,
// else containers); the global setup starts them. No Postgres to be had: one line, exit 1, before
// anything runs.
const services = await planServices().catch((error: unknown) => {
  if (!(error instanceof ServicesUnavailable)) throw error;
  process.stderr.write(`${error.message}\n`);
  process.exit(1);
});
const redisAvailable = services.redis.kind !== 'none';
// One line saying why, when the Redis runs cannot happen.
if (services.redis.kind === 'none') process.stdout.write(`queue backend redis: end-to-end runs skipped: ${services.redis.why}\n`);

// No retry, on CI either: a test that fails once is a flaky test, fixed at its cause (a state to
// wait for, not a longer bound), never hidden by a second run.
const common = { testTimeout: 30_000, hookTimeout: 60_000, teardownTimeout: 30_000 };

export default defineConfig({
  test: {
    // Once per run, for every project (a project that extended this would run it again); the
    // root project's provided values reach every project.
    globalSetup: ['test/helpers/global-setup.ts'],
    // Two cores: two test files at a time, each with its own database and Redis prefix.
    pool: 'forks',
    maxWorkers: 2,
    ...common,
    projects: [
      { test: { ...common, name: 'postgres', include: ['test/**/*.test.ts'], exclude: CLUSTER_ONLY, provide: { queueBackend: 'postgres' } } },
      ...(redisAvailable ? [{ test: { ...common, name: 'redis', include: BOTH_BACKENDS, provide: { queueBackend: 'redis' as const } } }] : []),
      ...(clusterTestsWanted(process.env)
        ? [
            {
              test: {
                ...common,
                name: 'cluster',
                include: CLUSTER_FILES,
                globalSetup: ['test/helpers/cluster-setup.ts'],
                provide: { queueBackend: 'redis' as const, redisMode: 'cluster' as const },
              },
            },
          ]
        : []),
    ],
  },
});
