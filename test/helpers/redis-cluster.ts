// A throwaway Redis Cluster for tests and benchmarks: `redis-server` processes with
// cluster-enabled on free loopback ports, data in a temporary folder, slots split evenly over the
// masters (what `redis-cli --cluster create --cluster-replicas 0` does), stopped and removed by
// stop(). Nothing is left behind: no process, no folder.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';

export interface LocalRedisCluster {
  /** Startup nodes, as REDIS_CLUSTER_NODES takes them. */
  nodes: string;
  ports: number[];
  /** The redis-server processes' ids (to prove they are gone after stop()). */
  pids: number[];
  /** The temporary folder of their data (removed by stop()). */
  dir: string;
  stop(): Promise<void>;
}

const SLOTS = 16384;

/** True when a `redis-server` binary is on the PATH. */
export function redisServerAvailable(): boolean {
  return spawnSync('redis-server', ['--version'], { stdio: 'ignore' }).status === 0;
}

function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/** Ports p whose cluster bus port p + 10000 is free too. */
async function freePorts(count: number): Promise<number[]> {
  const ports: number[] = [];
  for (let attempt = 0; ports.length < count && attempt < 500; attempt++) {
    const p = 20_000 + Math.floor(Math.random() * 35_000);
    if (ports.includes(p)) continue;
    if ((await portFree(p)) && (await portFree(p + 10_000))) ports.push(p);
  }
  if (ports.length < count) throw new Error('no free loopback ports for a Redis Cluster');
  return ports;
}

async function waitFor(check: () => Promise<boolean>, what: string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check().catch(() => false)) return;
    if (Date.now() > deadline) throw new Error(`local Redis Cluster: ${what} not reached within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export async function startRedisCluster(opts: { masters?: number; maxMemoryMb?: number } = {}): Promise<LocalRedisCluster> {
  const masters = opts.masters ?? 3;
  const dir = mkdtempSync(join(tmpdir(), 'redis-cluster-'));
  const ports = await freePorts(masters);
  const children: ChildProcess[] = [];
  const clients: Redis[] = [];
  // Should the test process die without its teardown, the servers die with it.
  const killAll = () => children.forEach((c) => c.kill('SIGKILL'));
  process.once('exit', killAll);
  const stop = async () => {
    process.off('exit', killAll);
    for (const c of clients) c.disconnect();
    await Promise.all(
      children.map(
        (child) =>
          new Promise<void>((resolve) => {
            if (child.exitCode !== null || child.signalCode !== null) return resolve();
            child.once('exit', () => resolve());
            child.kill('SIGTERM');
            setTimeout(() => child.kill('SIGKILL'), 5_000).unref();
          }),
      ),
    );
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    for (const port of ports) {
      const child = spawn(
        'redis-server',
        [
          '--port', String(port),
          '--bind', '127.0.0.1',
          '--cluster-enabled', 'yes',
          '--cluster-config-file', `nodes-${port}.conf`,
          '--cluster-node-timeout', '5000',
          '--dir', dir,
          '--save', '',
          '--appendonly', 'no',
          // Delayed jobs are promoted on time (the default hz 10 adds up to 100 ms).
          '--hz', '100',
          ...(opts.maxMemoryMb ? ['--maxmemory', `${opts.maxMemoryMb}mb`] : []),
        ],
        { stdio: 'ignore' },
      );
      children.push(child);
    }
    // A node that cannot start (port taken meanwhile) exits at once: fail instead of waiting.
    const exited = new Promise<never>((_, reject) => {
      for (const child of children) child.once('exit', (code) => reject(new Error(`redis-server exited (${code}) while the cluster started`)));
    });
    exited.catch(() => undefined);
    for (const port of ports) {
      const c = new Redis({ host: '127.0.0.1', port, lazyConnect: true, maxRetriesPerRequest: 1, retryStrategy: () => 50 });
      // Refused connections while the server starts are expected; waitFor retries.
      c.on('error', () => undefined);
      clients.push(c);
    }
    await Promise.race([waitFor(async () => (await Promise.all(clients.map((c) => c.ping()))).every((r) => r === 'PONG'), 'every node answering'), exited]);
    // Contiguous, even slot ranges, as `redis-cli --cluster create` assigns them.
    for (const [i, c] of clients.entries()) {
      const from = Math.floor((i * SLOTS) / masters);
      const to = Math.floor(((i + 1) * SLOTS) / masters) - 1;
      await c.call('CLUSTER', 'ADDSLOTSRANGE', String(from), String(to));
    }
    for (const c of clients.slice(1)) await c.call('CLUSTER', 'MEET', '127.0.0.1', String(ports[0]));
    await Promise.race([
      waitFor(async () => {
        const infos = await Promise.all(clients.map((c) => c.call('CLUSTER', 'INFO') as Promise<string>));
        return infos.every((info) => info.includes('cluster_state:ok') && info.includes(`cluster_known_nodes:${masters}`));
      }, 'cluster_state:ok'),
      exited,
    ]);
    for (const c of clients) c.disconnect();
    clients.length = 0;
  } catch (err) {
    await stop();
    throw err;
  }
  let stopped: Promise<void> | null = null;
  return {
    nodes: ports.map((p) => `127.0.0.1:${p}`).join(','),
    ports,
    pids: children.map((c) => c.pid ?? -1),
    dir,
    stop: () => (stopped ??= stop()),
  };
}
