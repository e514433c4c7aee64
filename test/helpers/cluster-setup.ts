// The cluster project's own global setup (vitest.config.ts): vitest runs a project's global setup
// only when a file of that project is in the run, so the 3-master Redis Cluster starts for
// `npm test` and for a cluster file, never for `npx vitest run test/unit/money.test.ts`. What
// every project needs (Postgres, Redis, the template database) stays in global-setup.ts.
import type { TestProject } from 'vitest/node';
import { startRedisCluster } from './redis-cluster.js';

export default async function setup(project: TestProject) {
  const cluster = await startRedisCluster({ masters: 3 });
  process.stdout.write(`tests: local Redis Cluster on ${cluster.nodes}\n`);
  // Overrides the root project's null for this project's files only.
  project.provide('redisClusterNodes', cluster.nodes);
  return () => cluster.stop();
}
