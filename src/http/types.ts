// The types route modules are written against: the typed Fastify instance and the dependencies
// the app hands to every route module. Routes import these from here, never from app.ts.
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type {
  FastifyBaseLogger,
  FastifyInstance,
  FastifyPluginAsync,
  RawReplyDefaultExpression,
  RawRequestDefaultExpression,
  RawServerDefault,
} from 'fastify';
import type { Config } from '../config.js';
import type { Pool } from '../db/pool.js';
import type { Logger } from '../log.js';
import type { Metrics } from '../observability/metrics.js';
import type { RenderPdf } from '../pdf/issued-invoice-pdf.js';
import type { OutboxPublisher } from '../queue/outbox.js';
import type { ReminderControl } from '../queue/reminder-service.js';
import type { Readiness } from './plugins/health.js';
import type { OperatorAddressOf } from '../invoicing/subscription-checkout.js';

/** The Fastify instance routes are registered on, typed by the TypeBox schemas. */
export type Api = FastifyInstance<RawServerDefault, RawRequestDefaultExpression, RawReplyDefaultExpression, FastifyBaseLogger, TypeBoxTypeProvider>;

// Defined below HTTP, where the invoicing service takes them too.
export type { OutboxPublisher } from '../queue/outbox.js';
export type { ReminderControl } from '../queue/reminder-service.js';

export interface AppDeps {
  config: Config;
  pool: Pool;
  log: Logger;
  outbox?: OutboxPublisher;
  reminders?: ReminderControl;
  /** Prometheus metrics: /metrics and the HTTP duration histogram. */
  metrics?: Metrics;
  /** Renders PDFs off the event loop (GET /v1/invoices/{id}/pdf); unset: on this thread. */
  renderPdf?: RenderPdf;
  /** The queue store's readiness check; without it /healthz and /readyz are not served. */
  readiness?: Readiness;
  /**
   * The address new subscriptions on a chain name as operator (the relayer's, src/chain); unset or
   * null for a chain: subscription checkouts there are refused (subscription_not_available).
   */
  operatorAddress?: OperatorAddressOf;
  /** Extra plugins (the queue dashboard) registered before the routes. */
  plugins?: FastifyPluginAsync[];
}
