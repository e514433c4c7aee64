// Decided when vitest loads its config: can the Redis-backend runs happen at all? Redis is there
// when TEST_REDIS_URL / REDIS_URL is set, when one answers on 127.0.0.1:6379, when a container
// runtime answers (testcontainers), or when `redis-server` is on the PATH (the global setup then
// starts a throwaway one). Otherwise those runs are left out, and the reason is printed once.
import { answers, LOCAL_REDIS, containerRuntimeAnswers, redisServerBinary } from './services.js';

export async function redisAvailability(env: NodeJS.ProcessEnv = process.env): Promise<{ available: boolean; why: string }> {
  if (env.TEST_REDIS_URL || env.REDIS_URL) return { available: true, why: 'TEST_REDIS_URL / REDIS_URL set' };
  if (await answers(LOCAL_REDIS, 6379)) return { available: true, why: `Redis answers at ${LOCAL_REDIS}` };
  if (redisServerBinary() !== null) return { available: true, why: 'redis-server on the PATH' };
  if (await containerRuntimeAnswers()) return { available: true, why: 'a container runtime answers' };
  return { available: false, why: `TEST_REDIS_URL unset, nothing answers at ${LOCAL_REDIS}, no redis-server on the PATH, no container runtime` };
}
