// What the webhook test files share: an API on a test database with fast retries, a receiver, and
// workers started per test (closed after it). Filled in by beforeAll, like useApiFixture.
import { afterAll, afterEach, beforeAll } from 'vitest';
import type { WorkerRuntime } from '../../src/runtime/worker-runtime.js';
import { startApiFixture, type ApiFixture } from './context.js';
import { apiClient, type ApiClient } from './http.js';
import { startWebhookReceiver, type WebhookReceiver } from './webhook-receiver.js';
import { startWorker } from './worker.js';

/** Retries in milliseconds, loopback receivers allowed, the outbox relayed every 100 ms. */
export const FAST = {
  WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
  WEBHOOK_BACKOFF_BASE_MS: '50',
  WEBHOOK_BACKOFF_MAX_MS: '400',
  WEBHOOK_TIMEOUT_MS: '3000',
  OUTBOX_RELAY_INTERVAL_MS: '100',
};

export interface WebhookTestContext {
  fx: ApiFixture;
  api: ApiClient;
  receiver: WebhookReceiver;
  /** Run after the current test, last first. */
  cleanups: (() => Promise<unknown>)[];
  /** A worker on FAST and `overrides`, closed after the test. */
  worker(overrides?: Record<string, string>): Promise<WorkerRuntime>;
}

export function useWebhookFixture(): WebhookTestContext {
  const fx = {} as ApiFixture;
  const receiver = {} as WebhookReceiver;
  const cleanups: (() => Promise<unknown>)[] = [];
  let started: ApiFixture | undefined;
  let listening: WebhookReceiver | undefined;
  beforeAll(async () => {
    started = await startApiFixture(FAST);
    Object.assign(fx, started);
    listening = await startWebhookReceiver();
    Object.assign(receiver, listening);
  });
  afterEach(async () => {
    while (cleanups.length) await cleanups.pop()!().catch(() => undefined);
  });
  afterAll(async () => {
    await listening?.close();
    await started?.close();
  });
  return {
    fx,
    api: apiClient(() => fx.api.app),
    receiver,
    cleanups,
    async worker(overrides = {}) {
      const w = await startWorker(fx.env.config({ ...FAST, ...overrides }));
      cleanups.push(() => w.close());
      return w;
    },
  };
}
