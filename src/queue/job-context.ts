// What every job handler receives besides its payload, and the shape of the handler registry the
// entrypoint hands to the worker runtime. The runtime builds the context; jobs/ implements the
// handlers. Defined here, below both, so neither imports the other.
import type { RenderPdf } from '../pdf/issued-invoice-pdf.js';
import type { Relayer } from '../chain/relayer.js';
import type { Config } from '../config.js';
import type { Pool } from '../db/pool.js';
import type { MailTransport } from '../mail/transport.js';
import type { JobName, JobPayloads } from './catalogue.js';
import type { JobHandler } from './dispatcher.js';
import type { ReminderService } from './reminder-service.js';

export interface JobContext {
  config: Config;
  pool: Pool;
  mail: MailTransport;
  reminders: ReminderService;
  /** Renders a PDF off the event loop (the worker's thread pool); unset: on this thread. */
  renderPdf?: RenderPdf;
  /** Counts an email by kind and outcome (metrics). */
  countEmail?(kind: string, outcome: 'sent' | 'failed' | 'skipped'): void;
  /** Records how late a reminder fired against its planned slot (metrics). */
  observeReminderLateness?(seconds: number): void;
  webhooks: WebhookServices;
  /** One scan of a watched chain (src/chain/watcher.ts); unset when the process watches none. */
  watchChain?(chainId: number): Promise<string>;
  /** The relayer (src/chain/relayer.ts): simulates and sends the subscriptions' charges and cancels; unset when no chain has a relayer key. */
  relayer?: SubscriptionRelayer;
  /** Records how late a period's first charge attempt came after its next_charge_at (metrics). */
  observeChargeLateness?(seconds: number): void;
  /** Counts one subscription looked at by a subscription job, by outcome (metrics). */
  countSubscriptionWork?(job: 'subscriptions.charge' | 'subscriptions.cancel', outcome: string): void;
}

/**
 * What the subscription jobs use of the relayer: simulate a charge (eth_call from the operator),
 * send a charge or a cancel. Anything it throws (RelayerUnavailable, RelayerOutOfGas, ...) is the
 * service's fault: retried, never counted against the customer.
 */
export type SubscriptionRelayer = Pick<Relayer, 'operatorAddress' | 'simulateCharge' | 'sendCharge' | 'sendCancel'>;
export type { ChargeArgs as ChargeTarget, ChargeFailureCode as ChargeRefusal } from '../chain/relayer.js';

/** What the webhook jobs need besides the pool: built by the worker runtime. */
export interface WebhookServices {
  /** Deliveries were written: the process's delivery loop looks now (src/runtime/webhook-delivery-loop.ts). */
  deliveriesDue(): void;
}

/** One handler per job of the catalogue, typed by its payload: a missing one is a type error. */
export type JobHandlers = { readonly [N in JobName]: JobHandler<JobPayloads[N], JobContext> };
