// What the webhook test files share: an API on a test database with fast retries, a receiver, and
// workers started per test (closed after it). Filled in by beforeAll, like useApiFixture.
import { afterAll, afterEach, beforeAll, expect } from 'vitest';
import { newId } from '../../src/domain/ids.js';
import { provisionMerchant, type MerchantKeys } from '../../src/runtime/provision.js';
import type { WorkerRuntime } from '../../src/runtime/worker-runtime.js';
import { startApiFixture, type ApiFixture } from './context.js';
import { apiClient, type ApiClient, type JsonBody } from './http.js';
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
  /** A merchant of its own (its endpoints see only its events): its API keys. */
  merchant(name?: string): Promise<MerchantKeys>;
  /** An endpoint on the receiver at `path`, its signing secret handed to the receiver. */
  endpoint(key: string, path: string, enabledEvents?: string[]): Promise<JsonBody>;
  /** An invoice of 10 (its `invoice.created` event is the one to deliver): its id. */
  invoice(key: string, network?: string): Promise<string>;
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
  const api = apiClient(() => fx.api.app);
  return {
    fx,
    api,
    receiver,
    cleanups,
    async worker(overrides = {}) {
      const w = await startWorker(fx.env.config({ ...FAST, ...overrides }));
      cleanups.push(() => w.close());
      return w;
    },
    async merchant(name = 'Hooks Inc') {
      return (await provisionMerchant(fx.api.pool, { id: newId('acct'), name, email: null })).keys;
    },
    async endpoint(key, path, enabledEvents = ['*']) {
      const res = await api.post('/v1/webhook_endpoints', key, { url: receiver.url(path), enabled_events: enabledEvents });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      receiver.setSecrets(path, [res.body.data.secret]);
      return res.body.data;
    },
    async invoice(key, network = 'base-sepolia') {
      const res = await api.post('/v1/invoices', key, { customer_email: 'hook@example.test', amount: '10', network });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      return res.body.data.id;
    },
  };
}
