// Prometheus metrics of one process, in a registry of its own (tests build several apps in one
// process). Gauges that read the queue store or Postgres are computed at scrape time, bounded in time.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { countPendingOutbox } from '../db/outbox.js';
import { DELIVERY_KINDS } from '../domain/delivery-kinds.js';
import { countPendingDeliveries } from '../db/webhook-deliveries.js';
import type { Queryable } from '../db/pool.js';
import { withTimeout } from '../lib/with-timeout.js';
import type { AppQueue } from '../queue/backend.js';

const JOB_STATES = ['waiting', 'active', 'delayed', 'completed', 'failed', 'prioritized', 'waiting-children'] as const;
const SCRAPE_TIMEOUT_MS = 1_000;

export interface Metrics {
  registry: Registry;
  httpDuration: Histogram<'method' | 'route' | 'status'>;
  jobDuration: Histogram<'name' | 'outcome'>;
  emails: Counter<'kind' | 'outcome'>;
  reminderLateness: Histogram;
  /** How late a period's first charge attempt came after the subscription's next_charge_at. */
  chargeLateness: Histogram;
  /** The subscription jobs' outcomes per subscription looked at (sent, failed_attempt, ended, ...). */
  subscriptionWork: Counter<'job' | 'outcome'>;
  webhookDeliveries: Counter<'outcome'>;
  webhookLatency: Histogram;
  chain: ChainMetrics;
  relayer: RelayerMetrics;
  /** Outbox rows the relay set aside (a job the catalogue does not know), by reason. */
  outboxSetAside: Counter<'reason'>;
}

/** The payment detector's view of each watched chain (label chain_id). */
export interface ChainMetrics {
  headBlock: Gauge<'chain_id'>;
  safeBlock: Gauge<'chain_id'>;
  cursorBlock: Gauge<'chain_id'>;
  lagBlocks: Gauge<'chain_id'>;
  lagSeconds: Gauge<'chain_id'>;
  rpcCalls: Counter<'chain_id' | 'method' | 'outcome'>;
  payments: Counter<'chain_id' | 'kind' | 'status'>;
  scanFailures: Counter<'chain_id' | 'cause'>;
  /** Token transfers to a settlement address that made no payment: zero_value, dust. */
  ignoredTransfers: Counter<'chain_id' | 'reason'>;
  ignoredLogs: Counter<'chain_id' | 'kind' | 'reason'>;
}

/** The relayer (src/chain/relayer.ts): its native balance per chain and key, what it sent. */
export interface RelayerMetrics {
  /** Native coin (ETH...) in whole units, read at each upkeep. */
  nativeBalance: Gauge<'chain_id' | 'address'>;
  /** 1 while the balance is below RELAYER_MIN_BALANCE. */
  lowBalance: Gauge<'chain_id' | 'address'>;
  transactions: Counter<'chain_id' | 'purpose' | 'outcome'>;
}

export function relayerMetrics(registry: Registry): RelayerMetrics {
  return {
    nativeBalance: new Gauge({
      name: 'relayer_native_balance',
      help: "The relayer's native coin balance (ETH, POL...) in whole units, by chain and address",
      labelNames: ['chain_id', 'address'],
      registers: [registry],
    }),
    lowBalance: new Gauge({
      name: 'relayer_balance_low',
      help: "1 while the relayer's native balance is below RELAYER_MIN_BALANCE (charges will soon fail for lack of gas)",
      labelNames: ['chain_id', 'address'],
      registers: [registry],
    }),
    transactions: new Counter({
      name: 'relayer_transactions_total',
      help: 'Relayer transactions by purpose (charge, cancel, filler) and outcome (sent, rebroadcast, replaced, mined, reverted, dropped, out_of_gas, refused)',
      labelNames: ['chain_id', 'purpose', 'outcome'],
      registers: [registry],
    }),
  };
}

function chainMetrics(registry: Registry): ChainMetrics {
  const gauge = (name: string, help: string) => new Gauge({ name, help, labelNames: ['chain_id'], registers: [registry] });
  return {
    headBlock: gauge('chain_head_block', 'The chain head last read from its RPC'),
    safeBlock: gauge('chain_safe_block', 'The newest block whose payments count (head - confirmations)'),
    cursorBlock: gauge('chain_cursor_block', 'The last block scanned up to the safe head'),
    lagBlocks: gauge('chain_lag_blocks', 'Blocks between the safe head and the cursor: confirmed payments not scanned yet'),
    lagSeconds: gauge('chain_lag_seconds', 'Seconds since the time of the cursor block: how late confirmed payments are found'),
    rpcCalls: new Counter({
      name: 'chain_rpc_calls_total',
      help: 'RPC calls of the payment detector by method and outcome (ok, error, range_refused, rate_limited)',
      labelNames: ['chain_id', 'method', 'outcome'],
      registers: [registry],
    }),
    payments: new Counter({
      name: 'chain_payments_total',
      help: 'Payments the detector recorded, by kind (proxy, transfer) and status (pending, confirmed, removed, reorged_out)',
      labelNames: ['chain_id', 'kind', 'status'],
      registers: [registry],
    }),
    scanFailures: new Counter({
      name: 'chain_scan_failures_total',
      help:
        'Runs of the payment detector that did not move the cursor, by cause: outage, rate_limit, range (refused at one block and one address), ' +
        'bug (the run failed), inconsistent_logs (a forged or mangled log: the run failed), lagging_node, unverified_head, wrong_chain_id, watched_set, no_quorum',
      labelNames: ['chain_id', 'cause'],
      registers: [registry],
    }),
    ignoredTransfers: new Counter({
      name: 'chain_ignored_transfers_total',
      help: 'Logs to a settlement address that are no payment, by reason (zero_value; dust: below 0.01 of a token unit and matching no invoice)',
      labelNames: ['chain_id', 'reason'],
      registers: [registry],
    }),
    ignoredLogs: new Counter({
      name: 'chain_ignored_logs_total',
      help:
        'Confirmed subscription contract logs that made nothing, by kind and reason (subscribe/unmatched: terms not the checkout\'s, an unknown or used reference, its tokens counted to no invoice; cancel/unknown_subscription)',
      labelNames: ['chain_id', 'kind', 'reason'],
      registers: [registry],
    }),
  };
}

export function createMetrics(opts: { queues: AppQueue[]; db: Queryable; defaultMetrics?: boolean }): Metrics {
  const registry = new Registry();
  if (opts.defaultMetrics !== false) collectDefaultMetrics({ register: registry });

  new Gauge({
    name: 'invoice_queue_jobs',
    help: 'Jobs in each BullMQ queue by state',
    labelNames: ['queue', 'state'],
    registers: [registry],
    async collect() {
      // All queues at once (12 reminder shards on a cluster): a scrape is bounded by one timeout.
      await Promise.all(
        opts.queues.map(async (queue) => {
          try {
            const counts = await withTimeout(queue.getJobCounts(...JOB_STATES), SCRAPE_TIMEOUT_MS, 'queue counts');
            for (const state of JOB_STATES) this.set({ queue: queue.name, state }, counts[state] ?? 0);
          } catch {
            // Queue store unreachable: leave the last values; readyz reports the outage.
          }
        }),
      );
    },
  });
  new Gauge({
    name: 'webhook_delivery_backlog',
    help: 'Webhook deliveries not settled yet (pending: first attempt or a retry to come)',
    registers: [registry],
    async collect() {
      try {
        this.set(await withTimeout(countPendingDeliveries(opts.db), SCRAPE_TIMEOUT_MS, 'webhook backlog'));
      } catch {
        // Postgres unreachable: keep the last value.
      }
    },
  });
  new Gauge({
    name: 'invoice_outbox_backlog',
    help: 'Outbox rows committed but not yet handed to BullMQ',
    registers: [registry],
    async collect() {
      try {
        this.set(await withTimeout(countPendingOutbox(opts.db), SCRAPE_TIMEOUT_MS, 'outbox backlog'));
      } catch {
        // Postgres unreachable: keep the last value.
      }
    },
  });

  return {
    registry,
    chain: chainMetrics(registry),
    relayer: relayerMetrics(registry),
    httpDuration: new Histogram({
      name: 'http_request_duration_seconds',
      help: 'HTTP request duration by route and status',
      labelNames: ['method', 'route', 'status'],
      buckets: [0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers: [registry],
    }),
    jobDuration: new Histogram({
      name: 'invoice_job_duration_seconds',
      help: 'Job run duration by job name and outcome',
      labelNames: ['name', 'outcome'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers: [registry],
    }),
    emails: new Counter({
      name: 'invoice_emails_total',
      help: `Emails by kind (${DELIVERY_KINDS.join(', ')}) and outcome (sent, failed, skipped)`,
      labelNames: ['kind', 'outcome'],
      registers: [registry],
    }),
    webhookDeliveries: new Counter({
      name: 'webhook_deliveries_total',
      help: 'Webhook delivery attempts by outcome (succeeded, retrying, failed: given up, skipped: endpoint disabled)',
      labelNames: ['outcome'],
      registers: [registry],
    }),
    webhookLatency: new Histogram({
      name: 'webhook_delivery_latency_seconds',
      help: 'From the event being created to the 2xx of its delivery',
      buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 30, 300, 3600, 86_400],
      registers: [registry],
    }),
    outboxSetAside: new Counter({
      name: 'invoice_outbox_set_aside_total',
      help: 'Outbox rows set aside by the relay, never to be handed over (reason unknown_job: a job name the catalogue does not know)',
      labelNames: ['reason'],
      registers: [registry],
    }),
    reminderLateness: new Histogram({
      name: 'invoice_reminder_lateness_seconds',
      help: 'How late a reminder fired against its planned slot',
      buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 5, 30, 60, 300],
      registers: [registry],
    }),
    chargeLateness: new Histogram({
      name: 'subscription_charge_lateness_seconds',
      help: "How late a period's first charge attempt (the charge sent, or the failure counted) came after the subscription's next_charge_at",
      buckets: [0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, 3600],
      registers: [registry],
    }),
    subscriptionWork: new Counter({
      name: 'subscription_work_total',
      help: 'Subscriptions the worker looked at, by job (subscriptions.charge, subscriptions.cancel) and outcome',
      labelNames: ['job', 'outcome'] as const,
      registers: [registry],
    }),
  };
}
