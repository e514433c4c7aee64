// Redis Cluster specifics: the throwaway cluster harness itself, and the layout of the service's
// keys on a cluster (every queue in one slot of its own, through its hash tag). The end-to-end
// send and reminder files run on the cluster as well. This file runs in the `cluster` test project
// only (vitest.config.ts): the Redis queue backend on the local cluster.
import { existsSync } from 'node:fs';
import calculateSlot from 'cluster-key-slot';
import { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createLogger } from '../../src/log.js';
import { QUEUES } from '../../src/queue/catalogue.js';
import { createRedisConnections, probeRedis, queuePrefix } from '../../src/queue/redis.js';
import { reminderShardSlot, reminderShardTag } from '../../src/queue/reminder-shards.js';
import { prefixClaimKey } from '../../src/queue/prefix-claim.js';
import { createApiRuntime, type ApiRuntime } from '../../src/runtime/api-runtime.js';
import type { WorkerRuntime } from '../../src/runtime/worker-runtime.js';
import { createTestEnv, deleteRedisPrefix, redisTargetOf, scanNode, type TestEnv } from '../helpers/context.js';
import { redisServerAvailable, startRedisCluster } from '../helpers/redis-cluster.js';
import { startWorker, waitUntil } from '../helpers/worker.js';

const onCluster = inject('queueBackend') === 'redis' && inject('redisMode') === 'cluster' && inject('redisClusterNodes') !== null;

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe.skipIf(!redisServerAvailable())('the local Redis Cluster harness', () => {
  it('starts 3 masters covering every slot, and stop() leaves no process and no folder behind', async () => {
    const cluster = await startRedisCluster({ masters: 3 });
    let stopped = false;
    try {
      const client = new Cluster(cluster.nodes.split(',').map((n) => ({ host: '127.0.0.1', port: Number(n.split(':')[1]) })));
      try {
        const info = (await client.cluster('INFO')) as string;
        expect(info).toContain('cluster_state:ok');
        expect(info).toContain('cluster_slots_assigned:16384');
        expect(info).toContain('cluster_known_nodes:3');
        expect(client.nodes('master')).toHaveLength(3);
      } finally {
        client.disconnect();
      }
      expect(cluster.pids.every(alive)).toBe(true);
      await cluster.stop();
      stopped = true;
      expect(cluster.pids.filter(alive)).toEqual([]);
      expect(existsSync(cluster.dir)).toBe(false);
    } finally {
      if (!stopped) await cluster.stop();
    }
  });
});

describe.skipIf(!redisServerAvailable())('readiness on a Redis Cluster', () => {
  it('fails once a master is lost, although the other nodes still answer PING', async () => {
    const cluster = await startRedisCluster({ masters: 3 });
    const connections = createRedisConnections({ redisUrl: 'redis://127.0.0.1:6379', redisClusterNodes: cluster.nodes.split(',').map((n) => ({ host: '127.0.0.1', port: Number(n.split(':')[1]) })) });
    connections.client.on('error', () => undefined);
    const survivor = new Redis({ host: '127.0.0.1', port: cluster.ports[1], lazyConnect: true });
    try {
      await expect(probeRedis(connections.client)).resolves.toBeUndefined();
      process.kill(cluster.pids[0], 'SIGKILL');
      // Within the cluster's node timeout (5 s in the harness) the others mark it failed.
      await waitUntil(async () => probeRedis(connections.client).then(() => false, () => true), 30_000, 200);
      await survivor.connect();
      expect(await survivor.ping()).toBe('PONG');
      await expect(probeRedis(connections.client)).rejects.toThrow(/cluster state is fail/i);
    } finally {
      survivor.disconnect();
      await connections.close();
      await cluster.stop();
    }
  }, 60_000);
});

describe.runIf(onCluster)('the service on a Redis Cluster', () => {
  let env: TestEnv;
  let api: ApiRuntime;
  let worker: WorkerRuntime;

  beforeAll(async () => {
    env = await createTestEnv();
    const config = env.config();
    api = await createApiRuntime(config, createLogger('silent'));
    worker = await startWorker(config);
  });
  afterAll(async () => {
    await worker?.close();
    await api?.close();
    await env?.cleanup();
  });

  it('puts each queue in a slot of its own through its hash tag, the 12 reminder shards 4 per master', async () => {
    await api.queues.send.add('probe', { n: 1 });
    await api.queues.webhooks.add('probe', { n: 1 }, { delay: 60_000 });
    for (let i = 0; i < 12; i++) await api.queues.reminders.shard(i).add('probe', { n: i }, { delay: 60_000 });
    const connections = createRedisConnections(redisTargetOf(env)!);
    try {
      const keysByNode: string[][] = [];
      for (const node of await connections.masters()) keysByNode.push(await scanNode(node, `${env.redisPrefix}:*`));
      const keys = keysByNode.flat();
      const slotsOf = (tag: string) => new Set(keys.filter((k) => k.startsWith(`${queuePrefix(env.redisPrefix, tag)}:`)).map((k) => calculateSlot(k)));
      // Every queue key is under its queue's hash tag. The prefix claim's marker is the one key
      // without: it only ever sees single-key commands (prefix-claim.ts).
      expect(keys).toContain(prefixClaimKey(env.redisPrefix));
      for (const k of keys.filter((k) => k !== prefixClaimKey(env.redisPrefix))) expect(k).toMatch(new RegExp(`^${env.redisPrefix}:\\{[^{}]+\\}:`));
      expect([...slotsOf(QUEUES.send)]).toEqual([calculateSlot(`{${QUEUES.send}}`)]);
      expect([...slotsOf(QUEUES.webhooks)]).toEqual([calculateSlot(`{${QUEUES.webhooks}}`)]);
      for (let i = 0; i < 12; i++) expect([...slotsOf(reminderShardTag(i))]).toEqual([reminderShardSlot(i)]);
      // Each master holds the keys of 4 shards.
      const shardsPerNode = keysByNode.map((nodeKeys) => new Set(nodeKeys.map((k) => /\{(invoice-reminders-\d+)[^}]*\}/.exec(k)?.[1]).filter(Boolean)).size);
      expect(shardsPerNode).toEqual([4, 4, 4]);
    } finally {
      await connections.close();
    }
  });

  it('answers /readyz on the cluster', async () => {
    const res = await api.app.inject({ method: 'GET', url: '/readyz' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ checks: { redis: 'ok' } });
  });

  it('deletes a prefix node by node', async () => {
    const target = redisTargetOf(env)!;
    const prefix = `${env.redisPrefix}-del`;
    const connections = createRedisConnections(target);
    try {
      // Keys spread over the slot space, hence over every master.
      for (let i = 0; i < 60; i++) await connections.client.set(`${prefix}:k${i}`, '1');
      const count = async () => {
        let n = 0;
        for (const node of await connections.masters()) n += (await scanNode(node, `${prefix}:*`)).length;
        return n;
      };
      expect(await count()).toBe(60);
      const perNode = await Promise.all((await connections.masters()).map(async (node) => (await scanNode(node, `${prefix}:*`)).length));
      expect(perNode.every((n) => n > 0)).toBe(true);
      await deleteRedisPrefix(target, prefix);
      expect(await count()).toBe(0);
    } finally {
      await connections.close();
    }
  });
});
