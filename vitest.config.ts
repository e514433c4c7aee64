import { defineConfig } from 'vitest/config';
import { clusterTestsWanted } from './test/helpers/test-modes.js';

// Every file runs on single Redis; the send and reminder end-to-end files run once more on a
// throwaway 3-master Redis Cluster (started by the global setup when `redis-server` is on the
// PATH; TEST_REDIS_CLUSTER=off skips it, =required makes its absence an error).
// (reminders-recovery.test.ts stays on single Redis: its Redis-loss simulation deletes keys while
// the reconciler, slower over 12 shards, may be restoring them, and it flakes on a loaded machine.)
const CLUSTER_FILES = [
  'test/integration/send-pipeline.test.ts',
  'test/integration/reminders.test.ts',
  'test/integration/reminder-shards.test.ts',
];

const common = {
  pool: 'forks' as const,
  testTimeout: 30_000,
  hookTimeout: 60_000,
  teardownTimeout: 30_000,
};

export default defineConfig({
  test: {
    // Runs once for every project (projects below do not inherit it).
    globalSetup: ['test/helpers/global-setup.ts'],
    // Two cores: two test files at a time, each with its own database and Redis prefix.
    maxWorkers: 2,
    projects: [
      { test: { ...common, name: 'single', include: ['test/**/*.test.ts'] } },
      ...(clusterTestsWanted(process.env, true)
        ? [{ test: { ...common, name: 'cluster', include: CLUSTER_FILES, provide: { redisMode: 'cluster' as const } } }]
        : []),
    ],
  },
});
