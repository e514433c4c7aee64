// Wires the API process: pool, producer queues, the outbox fast path, then the Fastify app.
import type { Config } from '../config.js';
import { createPool, type Pool } from '../db/pool.js';
import { buildApp, type AppDeps } from '../http/app.js';
import type { Api } from '../http/types.js';
import type { Logger } from '../log.js';
import { REMINDER_QUEUE, SEND_QUEUE } from '../queue/names.js';
import { reminderSchedulerSettings } from '../queue/reminder-schedulers.js';
import { createReminderService } from '../queue/reminder-service.js';
import { createMetrics } from '../observability/metrics.js';
import { DASHBOARD_PATH, registerDashboard } from '../http/plugins/dashboard.js';
import { createOutboxRelay } from '../queue/outbox-relay.js';
import { claimQueueStorage, queueBackendOf, type AppQueue } from '../queue/backend.js';
import { withTimeout } from './with-timeout.js';

const FAST_PATH_TIMEOUT_MS = 2_000;

export interface ApiRuntime {
  app: Api;
  pool: Pool;
  queues: { send: AppQueue; reminders: AppQueue };
  close(): Promise<void>;
}

export async function createApiRuntime(config: Config, log: Logger, extra: Partial<AppDeps> = {}): Promise<ApiRuntime> {
  await claimQueueStorage(config);
  const pool = createPool(config.databaseUrl);
  const backend = queueBackendOf(config, 'producer');
  const send = backend.queue(SEND_QUEUE);
  // A Queue emits 'error' while its store is away; the outbox covers those sends, so log and go on.
  send.on('error', (err) => log.debug({ err }, 'send queue connection error'));
  const reminderQueue = backend.queue(REMINDER_QUEUE, { settings: reminderSchedulerSettings });
  reminderQueue.on('error', (err) => log.debug({ err }, 'reminder queue connection error'));
  const reminders = createReminderService(pool, reminderQueue, backend, config.reminders);
  const relay = createOutboxRelay(pool, { send });
  const queues = [send, reminderQueue];
  const metrics = createMetrics({ queues, db: pool });
  const plugins: AppDeps['plugins'] = [];
  if (config.adminUser && config.adminPassword) {
    const credentials = { user: config.adminUser, password: config.adminPassword };
    plugins.push((app) => registerDashboard(app, queues, credentials, backend.kind));
    log.info({ path: DASHBOARD_PATH }, 'queue dashboard on');
  } else {
    log.info('queue dashboard off: set ADMIN_USER and ADMIN_PASSWORD to turn it on');
  }
  const app = await buildApp({
    config,
    pool,
    log,
    metrics,
    readiness: backend.readiness,
    plugins,
    outbox: { publish: (jobs) => withTimeout(relay.publish(jobs), FAST_PATH_TIMEOUT_MS, 'enqueue') },
    reminders: {
      stop: (id) => withTimeout(reminders.stop(id), FAST_PATH_TIMEOUT_MS, 'reminder stop'),
      resume: (id) => withTimeout(reminders.resume(id), FAST_PATH_TIMEOUT_MS, 'reminder resume'),
    },
    ...extra,
  });
  return {
    app,
    pool,
    queues: { send, reminders: reminderQueue },
    async close() {
      await app.close();
      // A queue that never reached Redis may never finish closing: bounded.
      await withTimeout(Promise.all([send.close(), reminderQueue.close()]), 2_000, 'queue close').catch(() => undefined);
      await backend.close();
      await pool.end();
    },
  };
}
