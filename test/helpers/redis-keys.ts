// Redis keys of one prefix, on a single Redis or node by node on a Cluster: for the tests and the
// benchmarks (no vitest here, so bench/ can import it).
import type { Redis } from 'ioredis';
import { createRedisConnections, type RedisTarget } from '../../src/queue/redis.js';

/** Keys matching the pattern on one node (SCAN: never a blocking whole-keyspace KEYS). */
export async function scanNode(node: Redis, pattern: string): Promise<string[]> {
  const keys: string[] = [];
  let cursor = '0';
  do {
    const [next, batch] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    cursor = next;
    keys.push(...batch);
  } while (cursor !== '0');
  return keys;
}

/**
 * Deletes every Redis key under `<prefix>:`: SCAN node by node (a cluster refuses a
 * whole-keyspace command), single-key UNLINKs; never FLUSHALL: others share the server.
 * Returns how many keys went.
 */
export async function deleteRedisPrefix(target: RedisTarget | string, prefix: string): Promise<number> {
  const connections = createRedisConnections(typeof target === 'string' ? { redisUrl: target, redisClusterNodes: null } : target);
  let deleted = 0;
  try {
    for (const node of await connections.masters()) {
      const keys = await scanNode(node, `${prefix}:*`);
      for (let i = 0; i < keys.length; i += 1000) {
        const pipeline = node.pipeline();
        for (const key of keys.slice(i, i + 1000)) pipeline.unlink(key);
        for (const [, n] of (await pipeline.exec()) ?? []) deleted += Number(n ?? 0);
      }
    }
  } finally {
    await connections.close();
  }
  return deleted;
}
