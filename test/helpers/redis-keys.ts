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

// SCAN and UNLINK inside one script: Redis runs it without interleaving any other command.
const DELETE_PREFIX_SCRIPT = `
local deleted = 0
local cursor = '0'
repeat
  local reply = redis.call('SCAN', cursor, 'MATCH', ARGV[1], 'COUNT', 1000)
  cursor = reply[1]
  for _, key in ipairs(reply[2]) do deleted = deleted + redis.call('UNLINK', key) end
until cursor == '0'
return deleted`;

/**
 * Deletes every key under `<prefix>:` of a single Redis in one step, as a lost Redis loses them:
 * no worker sees half of them gone, and none writes one back between the scan and the deletes
 * (deleteRedisPrefix leaves that window open, long on a loaded machine). A cluster has no such
 * step: its keys go node by node (deleteRedisPrefix).
 */
export async function loseRedisPrefix(target: RedisTarget, prefix: string): Promise<number> {
  if (target.redisClusterNodes !== null) return deleteRedisPrefix(target, prefix);
  const connections = createRedisConnections(target);
  try {
    const [node] = await connections.masters();
    return Number(await node.eval(DELETE_PREFIX_SCRIPT, 0, `${prefix}:*`));
  } finally {
    await connections.close();
  }
}
