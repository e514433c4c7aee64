// What every job handler receives besides its payload, and the shape of the handler registry the
// entrypoint hands to the worker runtime. The runtime builds the context; jobs/ implements the
// handlers. Defined here, below both, so neither imports the other.
import type { RenderPdf } from '../pdf/issued-invoice-pdf.js';
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
  /** The service's relayer (charges and cancels of subscriptions); unset: no subscription is charged by this process. */
  relayer?: SubscriptionRelayer;
  /** Records how late a period's first charge attempt came after its next_charge_at (metrics). */
  observeChargeLateness?(seconds: number): void;
  /** Counts one subscription looked at by a subscription job, by outcome (metrics). */
  countSubscriptionWork?(job: 'subscriptions.charge' | 'subscriptions.cancel', outcome: string): void;
}

/** The on-chain charge of one period: the subscription (contract, id), the period, its invoice's bytes8 payment reference. */
export interface ChargeTarget {
  contract: `0x${string}`;
  onchainId: bigint;
  periodIndex: number;
  paymentReference: `0x${string}`;
}

/** Why a simulated charge would revert; the first four count as a failed attempt (src/domain/subscriptions.ts). */
export type ChargeRefusal = 'insufficient_balance' | 'insufficient_allowance' | 'subscription_canceled' | 'subscription_ended' | 'period_not_begun' | 'period_already_charged';

/**
 * What the subscription jobs need of the relayer (src/chain, wt-relayer): simulate a charge
 * (eth_call from the operator), send a charge or a cancel (recorded before broadcast, one nonce
 * sequence per chain and key). Anything it throws (RPC down, no gas, a key missing) is the
 * service's fault: retried, never counted against the customer.
 */
export interface SubscriptionRelayer {
  simulateCharge(chainId: number, target: ChargeTarget): Promise<{ ok: true } | { ok: false; code: ChargeRefusal; message: string; shortAtomic?: bigint }>;
  sendCharge(chainId: number, target: ChargeTarget): Promise<{ txHash: `0x${string}`; nonce: number }>;
  sendCancel(chainId: number, target: { contract: `0x${string}`; onchainId: bigint }): Promise<{ txHash: `0x${string}`; nonce: number }>;
  /** The address new subscriptions of this chain name as operator; null: this process has no key for it. */
  operatorAddress(chainId: number): `0x${string}` | null;
}

/** What the webhook jobs need besides the pool: built by the worker runtime. */
export interface WebhookServices {
  /** Deliveries were written: the process's delivery loop looks now (src/runtime/webhook-delivery-loop.ts). */
  deliveriesDue(): void;
}

/** One handler per job of the catalogue, typed by its payload: a missing one is a type error. */
export type JobHandlers = { readonly [N in JobName]: JobHandler<JobPayloads[N], JobContext> };
