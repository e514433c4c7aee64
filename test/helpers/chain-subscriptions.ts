// Subscriptions on anvil as a customer makes them (the link's subscription checkout, then approve
// and subscribe(terms) from a funded test account, as `npm run subscribe` does), and what the
// crash and reorg files read about a period: its invoice, its payments, its Charged logs, its
// relayer transactions, its receipt emails. Nothing is stood in: the watcher makes the subscription.
import { decodeFunctionData, parseTransaction, type Address, type Hex } from 'viem';
import type { Pool } from '../../src/db/pool.js';
import { SUBSCRIPTION_MANAGER_ABI } from '../../src/chain/subscription-manager-abi.js';
import type { WellKnownAccount } from '../../src/devchain/accounts.js';
import { TEST_USDC_ABI } from '../../src/devchain/contracts.js';
import { sendSubscription } from '../../src/devchain/subscribe-command.js';
import type { SubscriptionCheckoutAnswer } from '../../src/http/schemas/payment-page.js';
import type { Api } from '../../src/http/types.js';
import type { TestChain } from './anvil.js';
import { recipientsOf, type SmtpSink } from './smtp-sink.js';
import { postSubscriptionCheckout } from './subscriptions.js';
import { waitUntil } from './worker.js';

export interface ChainSubscriber {
  email: string;
  payer: WellKnownAccount;
  subscriptionId: string;
  onchainId: bigint;
  /** The Subscribed block's time, ms. */
  startedAtMs: number;
  intervalSeconds: number;
}

/**
 * The checkout over HTTP (inject), then approve when short and subscribe(terms) from `payer`; waits
 * until the watcher made the subscription (the Subscribed log confirmed) and its period 0 is paid.
 */
export async function subscribeThroughCheckout(opts: {
  app: Api;
  pool: Pool;
  chain: TestChain;
  linkId: string;
  payer: WellKnownAccount;
  email: string;
  timeoutMs: number;
}): Promise<ChainSubscriber> {
  const checkout = await postSubscriptionCheckout(opts.app, opts.linkId, opts.email);
  if (checkout.status !== 200) throw new Error(`subscription checkout refused: ${checkout.status} ${JSON.stringify(checkout.body)}`);
  const answer = checkout.body as unknown as SubscriptionCheckoutAnswer;
  const sent = await sendSubscription({ rpcUrl: opts.chain.rpcUrl, answer }, opts.payer.privateKey);
  let row: { id: string; started_at: Date; interval_seconds: number } | undefined;
  await waitUntil(
    async () => {
      const { rows } = await opts.pool.query<{ id: string; started_at: Date; interval_seconds: number }>(
        `select s.id, s.started_at, s.interval_seconds from subscriptions s
         join invoices i on i.subscription_id = s.id and i.period_index = 0 and i.status = 'paid'
         where s.contract_address = $1 and s.onchain_id = $2`,
        [answer.contract_address, sent.onchainId.toString()],
      );
      row = rows[0];
      return row !== undefined;
    },
    opts.timeoutMs,
    200,
  );
  return { email: opts.email, payer: opts.payer, subscriptionId: row!.id, onchainId: sent.onchainId, startedAtMs: row!.started_at.getTime(), intervalSeconds: row!.interval_seconds };
}

export interface PeriodInvoice {
  id: string;
  code: string;
  status: string;
  period_index: number;
  amount_paid_atomic: string;
  attempt_count: number;
  failure_code: string | null;
  next_attempt_at: Date | null;
  payment_reference: string;
}

/** The period invoices of a subscription, by period. */
export async function periodInvoices(pool: Pool, subscriptionId: string): Promise<PeriodInvoice[]> {
  const { rows } = await pool.query<PeriodInvoice>(
    `select id, code, status, period_index, amount_paid_atomic::text, attempt_count, failure_code, next_attempt_at, payment_reference
     from invoices where subscription_id = $1 order by period_index, id`,
    [subscriptionId],
  );
  return rows;
}

export async function periodInvoice(pool: Pool, subscriptionId: string, k: number): Promise<PeriodInvoice | undefined> {
  return (await periodInvoices(pool, subscriptionId)).find((i) => i.period_index === k);
}

/** The Charged logs the chain holds for a subscription, whatever the period. */
export async function chargedLogs(chain: TestChain, onchainId: bigint): Promise<{ periodIndex: number; txHash: Hex; paymentReference: Hex }[]> {
  const logs = await chain.publicClient.getContractEvents({ address: chain.subscriptionManager, abi: SUBSCRIPTION_MANAGER_ABI, eventName: 'Charged', args: { id: onchainId }, fromBlock: 0n });
  return logs.map((l) => ({ periodIndex: l.args.periodIndex!, txHash: l.transactionHash, paymentReference: l.args.paymentReference! }));
}

/** The customer's token balance and the periods of the subscription's Charged logs, both at one block. */
export async function pulledAtOneBlock(chain: TestChain, s: Pick<ChainSubscriber, 'payer' | 'onchainId'>): Promise<{ balance: bigint; charged: number[] }> {
  const block = await chain.publicClient.getBlockNumber();
  const balance = await chain.publicClient.readContract({ address: chain.token, abi: TEST_USDC_ABI, functionName: 'balanceOf', args: [s.payer.address as Address], blockNumber: block });
  const logs = await chain.publicClient.getContractEvents({ address: chain.subscriptionManager, abi: SUBSCRIPTION_MANAGER_ABI, eventName: 'Charged', args: { id: s.onchainId }, fromBlock: 0n, toBlock: block });
  return { balance, charged: logs.map((l) => l.args.periodIndex!) };
}

export interface RelayerRow {
  tx_hash: string;
  nonce: string;
  status: string;
  broadcasts: number;
}

/** The relayer's transactions for the charge of period k (its subject: `charge:<contract>:<id>:<k>`). */
export async function chargeTransactions(pool: Pool, chain: TestChain, onchainId: bigint, k: number): Promise<RelayerRow[]> {
  const { rows } = await pool.query<RelayerRow>(
    'select tx_hash, nonce::text as nonce, status, broadcasts from relayer_transactions where subject = $1 order by id',
    [`charge:${chain.subscriptionManager.toLowerCase()}:${onchainId}:${k}`],
  );
  return rows;
}

/** The payments rows of an invoice (every status). */
export async function paymentsOf(pool: Pool, invoiceId: string): Promise<{ id: string; kind: string; status: string; outcome: string | null; tx_hash: string; reorged_out: boolean }[]> {
  const { rows } = await pool.query('select id, kind, status, outcome, tx_hash, reorged_out_at is not null as reorged_out from payments where invoice_id = $1 order by created_at, id', [invoiceId]);
  return rows;
}

/** How many events of each type an object has. */
export async function eventCounts(pool: Pool, objectId: string): Promise<Record<string, number>> {
  const { rows } = await pool.query<{ type: string; n: number }>('select type, count(*)::int as n from events where object_id = $1 group by type', [objectId]);
  return Object.fromEntries(rows.map((r) => [r.type, r.n]));
}

/** The delivery rows of an invoice by kind (receipt, payment_failed...). */
export async function deliveryCounts(pool: Pool, invoiceId: string): Promise<Record<string, number>> {
  const { rows } = await pool.query<{ kind: string; n: number }>('select kind, count(*)::int as n from deliveries where invoice_id = $1 group by kind', [invoiceId]);
  return Object.fromEntries(rows.map((r) => [r.kind, r.n]));
}

/** The receipt emails the customer received for the invoice of `code`. */
export const receiptEmails = (sink: SmtpSink, email: string, code: string) =>
  sink.messages.filter((m) => recipientsOf(m).includes(email) && (m.subject ?? '').startsWith('Payment received') && (m.subject ?? '').includes(code));

/** The charge a raw signed transaction makes, or null when it is not a SubscriptionManager charge. */
export function chargeIn(raw: Hex, manager: string): { onchainId: bigint; periodIndex: number } | null {
  const tx = parseTransaction(raw);
  if (!tx.to || tx.to.toLowerCase() !== manager.toLowerCase() || !tx.data) return null;
  try {
    const call = decodeFunctionData({ abi: SUBSCRIPTION_MANAGER_ABI, data: tx.data });
    if (call.functionName !== 'charge') return null;
    const [onchainId, periodIndex] = call.args;
    return { onchainId, periodIndex: Number(periodIndex) };
  } catch {
    return null;
  }
}
