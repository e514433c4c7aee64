// Where the suite's Postgres and Redis come from (test/helpers/services.ts): the variables, else
// containers; never whatever happens to listen on 5432 or 6379.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import {
  containerDefaults,
  DEFAULT_POSTGRES_IMAGE,
  DEFAULT_REDIS_IMAGE,
  NO_POSTGRES,
  planServices,
  ServicesUnavailable,
} from '../helpers/services.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const PG = 'postgres://postgres@db.test:5432/postgres';
const REDIS = 'redis://redis.test:6379';

/** A container runtime that answers (or not), counting how often it was asked. */
function runtime(answers: boolean) {
  const probe = async () => {
    probe.calls++;
    return answers;
  };
  probe.calls = 0;
  return probe;
}

describe('the test services', () => {
  it('uses TEST_DATABASE_URL and TEST_REDIS_URL as given, without asking for a container runtime', async () => {
    const probe = runtime(true);
    expect(await planServices({ TEST_DATABASE_URL: PG, TEST_REDIS_URL: REDIS }, probe)).toEqual({
      database: { kind: 'url', url: PG },
      redis: { kind: 'url', url: REDIS },
    });
    expect(probe.calls).toBe(0);
  });

  it('starts containers of the default images when no variable is set and a container runtime answers', async () => {
    const probe = runtime(true);
    expect(await planServices({}, probe)).toEqual({
      database: { kind: 'container', image: 'postgres:15' },
      redis: { kind: 'container', image: 'redis:7' },
    });
    expect(probe.calls).toBe(1);
  });

  it('takes the images from TEST_POSTGRES_IMAGE and TEST_REDIS_IMAGE', async () => {
    const plan = await planServices({ TEST_POSTGRES_IMAGE: 'registry.test/pg:15.9', TEST_REDIS_IMAGE: 'registry.test/redis:7.2' }, runtime(true));
    expect(plan.database).toEqual({ kind: 'container', image: 'registry.test/pg:15.9' });
    expect(plan.redis).toEqual({ kind: 'container', image: 'registry.test/redis:7.2' });
  });

  it('a container for the one service whose variable is missing', async () => {
    expect(await planServices({ TEST_DATABASE_URL: PG }, runtime(true))).toEqual({
      database: { kind: 'url', url: PG },
      redis: { kind: 'container', image: 'redis:7' },
    });
  });

  it('no TEST_DATABASE_URL and no container runtime: stops with one line saying what to install or set', async () => {
    const failure = await planServices({}, runtime(false)).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(ServicesUnavailable);
    const line = (failure as Error).message;
    expect(line).toBe(NO_POSTGRES);
    expect(line).not.toContain('\n');
    expect(line).toMatch(/install Docker/);
    expect(line).toMatch(/TEST_DATABASE_URL/);
    expect(line).toMatch(/npm run test:images/);
  });

  it("never falls back on DATABASE_URL / REDIS_URL (the service's own variables) or on a server that happens to listen", async () => {
    const env = { DATABASE_URL: 'postgres://postgres@127.0.0.1:5432/postgres', REDIS_URL: 'redis://127.0.0.1:6379' };
    await expect(planServices(env, runtime(false))).rejects.toThrow(NO_POSTGRES);
    expect(await planServices(env, runtime(true))).toEqual({
      database: { kind: 'container', image: DEFAULT_POSTGRES_IMAGE },
      redis: { kind: 'container', image: DEFAULT_REDIS_IMAGE },
    });
  });

  it('TEST_DATABASE_URL=embedded asks for the embedded PostgreSQL; Redis without its variable nor a runtime is left out, with the reason', async () => {
    const plan = await planServices({ TEST_DATABASE_URL: 'embedded' }, runtime(false));
    expect(plan.database).toEqual({ kind: 'embedded' });
    expect(plan.redis.kind).toBe('none');
    expect(plan.redis.kind === 'none' && plan.redis.why).toMatch(/TEST_REDIS_URL unset and no container runtime answers/);
  });

  it("defaults to production's images (docker-compose.yml), the ones scripts/build-test-images.sh builds", () => {
    const compose = parse(readFileSync(path.join(ROOT, 'docker-compose.yml'), 'utf8'), { merge: true }) as { services: Record<string, { image?: string }> };
    expect(DEFAULT_POSTGRES_IMAGE).toBe(compose.services.postgres?.image);
    expect(DEFAULT_REDIS_IMAGE).toBe(compose.services.redis?.image);
    const script = readFileSync(path.join(ROOT, 'scripts/build-test-images.sh'), 'utf8');
    expect(script).toContain(`postgres_image=\${TEST_POSTGRES_IMAGE:-${DEFAULT_POSTGRES_IMAGE}}`);
    expect(script).toContain(`redis_image=\${TEST_REDIS_IMAGE:-${DEFAULT_REDIS_IMAGE}}`);
  });

  it("sets testcontainers' Ryuk and host settings only when unset", () => {
    const unset: NodeJS.ProcessEnv = {};
    containerDefaults(unset);
    expect(unset).toEqual({ TESTCONTAINERS_RYUK_DISABLED: 'true', TESTCONTAINERS_HOST_OVERRIDE: '127.0.0.1' });
    const set: NodeJS.ProcessEnv = { TESTCONTAINERS_RYUK_DISABLED: 'false', TESTCONTAINERS_HOST_OVERRIDE: 'docker.test' };
    containerDefaults(set);
    expect(set).toEqual({ TESTCONTAINERS_RYUK_DISABLED: 'false', TESTCONTAINERS_HOST_OVERRIDE: 'docker.test' });
  });
});
