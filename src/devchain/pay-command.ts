// `npm run pay` (main/pay.ts): pays an invoice on a local chain from a funded test account. What
// it reads (the arguments), what it refuses and what it sends are plain functions here, called by
// the unit tests; sendPayment does the chain I/O; the entrypoint owns the database and the process.
import { LOCAL_CHAIN_ID } from '../domain/chains.js';
import {
  createPublicClient,
  createWalletClient,
  defineChain,
  formatUnits,
  http,
  parseEventLogs,
  type Address,
  type Hash,
  type Hex,
} from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import type { Chain } from '../domain/chains.js';
import type { InvoiceStatus } from '../domain/invoice-rules.js';
import { parseAmount, toAtomic } from '../domain/money.js';
import { paymentInstructions, remainingAtomic, splitFee } from '../domain/payments.js';
import { DEPLOYER_INDEX, WELL_KNOWN_ACCOUNTS } from './accounts.js';
import { FEE_PROXY_ABI } from '../chain/abi.js';
import { firstLine } from '../lib/first-line.js';
import { TEST_USDC_ABI } from './contracts.js';

export const PAY_USAGE = 'npm run pay -- <payment reference | invoice reference | payment page URL | invoice id> [amount] [--transfer] [--key <private key>]';

/** Refused before anything is sent: main/pay.ts prints the message as one line and exits 1. */
export class PayCommandError extends Error {}

export interface PayCommandOptions {
  /** The invoice's id, page reference or payment reference (a page URL is reduced to its reference). */
  handle: string;
  /** A decimal amount of the token; null: what remains to pay. */
  amount: string | null;
  /** A plain ERC-20 transfer to the settlement address instead of the fee proxy. */
  transfer: boolean;
  /** Who pays: default anvil's well-known account 0. */
  privateKey: Hex;
}

/** The payer when `--key` is not given: anvil's account 0, funded with test USDC by `npm run chain`. */
export const DEFAULT_PAYER = WELL_KNOWN_ACCOUNTS[DEPLOYER_INDEX];

/** Reads the arguments after `npm run pay --`. */
export function payCommandOptions(args: readonly string[]): PayCommandOptions {
  const positional: string[] = [];
  let transfer = false;
  let privateKey: string | null = null;
  for (let i = 0; i < args.length; i += 1) {
    const arg = args[i];
    if (arg === '--transfer') transfer = true;
    else if (arg === '--key') {
      if (i + 1 >= args.length) throw new PayCommandError(`--key needs a private key (usage: ${PAY_USAGE})`);
      privateKey = args[++i];
    } else if (arg.startsWith('--key=')) privateKey = arg.slice('--key='.length);
    else if (arg.startsWith('--')) throw new PayCommandError(`unknown option "${arg}" (usage: ${PAY_USAGE})`);
    else positional.push(arg);
  }
  if (positional.length === 0) throw new PayCommandError(`which invoice? (usage: ${PAY_USAGE})`);
  if (positional.length > 2) throw new PayCommandError(`unexpected argument "${positional[2]}" (usage: ${PAY_USAGE})`);
  // Never echoed: it is a private key, even if a test one.
  if (privateKey !== null && !/^0x[0-9a-fA-F]{64}$/.test(privateKey)) throw new PayCommandError('--key must be a private key: 0x and 64 hexadecimal characters');
  return {
    handle: invoiceHandle(positional[0]),
    amount: positional[1] ?? null,
    transfer,
    privateKey: (privateKey as Hex | null) ?? DEFAULT_PAYER.privateKey,
  };
}

/** A payment page URL (`<PAYMENT_PAGE_BASE>/<reference>`) gives its reference; anything else is taken as it is. */
export function invoiceHandle(raw: string): string {
  const text = raw.trim();
  if (!/^https?:\/\//i.test(text)) return text;
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new PayCommandError(`"${text.slice(0, 80)}" is not a URL`);
  }
  const segments = url.pathname.split('/').filter((s) => s !== '');
  // The page's own status endpoint (`/pay/<reference>/status`) names the same invoice.
  if (segments.at(-1) === 'status') segments.pop();
  const last = segments.at(-1);
  if (last === undefined) throw new PayCommandError(`${text} names no invoice: a payment page URL ends with the invoice's reference`);
  return decodeURIComponent(last);
}

/** The invoice as `npm run pay` needs it (read by main/pay.ts). */
export interface InvoiceToPay {
  id: string;
  code: string | null;
  status: InvoiceStatus;
  currency: string;
  chainId: number;
  network: string;
  tokenAddress: string;
  tokenDecimals: number;
  amountAtomic: bigint | null;
  paidAtomic: bigint;
  feeAtomic: bigint;
  feeCountedAtomic: bigint | null;
  feeBps: number | null;
  settlementAddress: string | null;
  paymentReference: string | null;
}

const LOOPBACK_HOSTS = new Set(['localhost', '127.0.0.1', '[::1]', '::1']);

/** True for an RPC URL on this machine (localhost, 127.0.0.0/8, ::1). */
export function isLoopbackUrl(raw: string): boolean {
  let host: string;
  try {
    host = new URL(raw).hostname.toLowerCase();
  } catch {
    return false;
  }
  return LOOPBACK_HOSTS.has(host) || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}

/**
 * The RPC URL to send on, when the chain is a local one: network `local` or anvil's chain id, at
 * an RPC URL on a loopback host. Test keys are public, so nothing is ever sent anywhere else.
 */
export function localRpcUrl(chain: Pick<Chain, 'chainId' | 'network' | 'rpcUrls'>): string | null {
  if (chain.network !== 'local' && chain.chainId !== LOCAL_CHAIN_ID) return null;
  return chain.rpcUrls.find(isLoopbackUrl) ?? null;
}

interface PlanBase {
  rpcUrl: string;
  chainId: number;
  token: Address;
  tokenDecimals: number;
  currency: string;
  /** The settlement address. */
  to: Address;
  /** What leaves the payer's account in total. */
  totalAtomic: bigint;
}

export type PaymentPlan =
  | (PlanBase & { kind: 'proxy'; proxy: Address; amountAtomic: bigint; feeAtomic: bigint; feeAddress: Address; reference: Hex })
  | (PlanBase & { kind: 'transfer' });

const name = (inv: Pick<InvoiceToPay, 'code' | 'id'>) => `invoice ${inv.code ?? inv.id}`;

/**
 * What to send for this invoice, or a PayCommandError saying why nothing can be: a draft, a paid or
 * void invoice, no settlement address or reference, a chain that is not local or has no fee proxy,
 * nothing left to pay, a bad amount. `chain` is the invoice's chain as configured (undefined: none).
 */
export function planPayment(inv: InvoiceToPay, chain: Chain | undefined, opts: Pick<PayCommandOptions, 'amount' | 'transfer'>): PaymentPlan {
  if (inv.status === 'draft') throw new PayCommandError(`${name(inv)} is a draft: send it first (POST /v1/invoices/${inv.id}/send)`);
  if (inv.status === 'paid') throw new PayCommandError(`${name(inv)} is already paid`);
  if (inv.status === 'void') throw new PayCommandError(`${name(inv)} is void`);
  if (!chain) throw new PayCommandError(`${name(inv)} is on chain ${inv.chainId}, which is not configured here (CHAINS_FILE, or var/chain/chains.json of npm run chain)`);
  const rpcUrl = localRpcUrl(chain);
  if (rpcUrl === null) {
    throw new PayCommandError(
      `${name(inv)} is on ${chain.network} (chain ${chain.chainId}), not a local chain: npm run pay sends only on network local or chain ${LOCAL_CHAIN_ID} at a loopback RPC URL`,
    );
  }
  if (!inv.settlementAddress || !inv.paymentReference) {
    throw new PayCommandError(`${name(inv)} has no payment instructions: its account had no settlement address when it was sent (PATCH /v1/account, then send a new invoice)`);
  }
  if (inv.amountAtomic === null) throw new PayCommandError(`${name(inv)} has no amount`);
  const remaining = remainingAtomic({ amountAtomic: inv.amountAtomic, paidAtomic: inv.paidAtomic });
  if (remaining === 0n) throw new PayCommandError(`${name(inv)} has nothing left to pay (its payments are waiting for confirmations)`);
  let totalAtomic = remaining;
  if (opts.amount !== null) {
    const parsed = parseAmount(opts.amount, inv.tokenDecimals);
    if (!parsed.ok) throw new PayCommandError(parsed.message.replace(/^amount/, `the amount "${opts.amount.slice(0, 40)}"`).replace(/\.$/, ''));
    totalAtomic = BigInt(toAtomic(parsed.value, inv.tokenDecimals));
  }
  const base = { rpcUrl, chainId: chain.chainId, token: inv.tokenAddress as Address, tokenDecimals: inv.tokenDecimals, currency: inv.currency, to: inv.settlementAddress as Address, totalAtomic };
  if (opts.transfer) return { ...base, kind: 'transfer' };

  const instructions = paymentInstructions({ ...inv, amountAtomic: inv.amountAtomic }, chain);
  if (instructions === null) {
    throw new PayCommandError(`${name(inv)} has no payment instructions: chain ${chain.chainId} has no fee proxy or fee address (--transfer pays by plain transfer)`);
  }
  // All that remains: exactly the instructions; another amount: its fee by the same rule.
  const split =
    totalAtomic === BigInt(instructions.total_atomic)
      ? { amountAtomic: BigInt(instructions.amount_atomic), feeAtomic: BigInt(instructions.fee_atomic) }
      : splitFee(totalAtomic, inv.feeBps ?? 0);
  return {
    ...base,
    kind: 'proxy',
    proxy: instructions.proxy_address as Address,
    feeAddress: instructions.fee_address as Address,
    reference: instructions.payment_reference as Hex,
    ...split,
  };
}

export interface SentPayment {
  from: Address;
  txHash: Hash;
  blockNumber: bigint;
  /** The approve sent first, when the allowance was short. */
  approveTxHash: Hash | null;
}

/** Receipts are polled this often: a local chain makes a block a second. */
const RECEIPT_POLL_MS = 100;
const RECEIPT_TIMEOUT_MS = 60_000;

/**
 * A key's clients on the local chain at `rpcUrl` (`npm run pay`, `npm run subscribe`), once the
 * node answered `chainId`; `fail` makes the command's own one-line error, `what` names what is on that chain.
 */
export async function connectLocalSigner(chainId: number, rpcUrl: string, privateKey: Hex, what: string, fail: (message: string) => Error) {
  const account = privateKeyToAccount(privateKey);
  const chain = defineChain({
    id: chainId,
    name: `local ${chainId}`,
    nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 },
    rpcUrls: { default: { http: [rpcUrl] } },
  });
  const transport = http(rpcUrl, { retryCount: 0 });
  const publicClient = createPublicClient({ chain, transport, pollingInterval: RECEIPT_POLL_MS, cacheTime: 0 });
  const wallet = createWalletClient({ account, chain, transport });
  const answered = await publicClient.getChainId().catch((err: unknown) => {
    throw fail(`no chain answers at ${rpcUrl} (${firstLine(err)}): is npm run chain running?`);
  });
  if (answered !== chainId) throw fail(`${rpcUrl} answers chain id ${answered}, ${what} is on chain ${chainId}`);
  return { account, publicClient, wallet };
}

/**
 * Sends the plan from `privateKey`'s account (signed here): checks the node's chain id and the
 * payer's balance, approves the proxy for the total when the allowance is short (and waits for it,
 * so the payment's gas can be estimated), then pays; resolves with the mined payment.
 */
export async function sendPayment(plan: PaymentPlan, privateKey: Hex): Promise<SentPayment> {
  const { account, publicClient, wallet } = await connectLocalSigner(plan.chainId, plan.rpcUrl, privateKey, 'the invoice', (m) => new PayCommandError(m));
  const balance = await publicClient.readContract({ address: plan.token, abi: TEST_USDC_ABI, functionName: 'balanceOf', args: [account.address] });
  if (balance < plan.totalAtomic) {
    const fmt = (v: bigint) => `${formatUnits(v, plan.tokenDecimals)} ${plan.currency}`;
    throw new PayCommandError(`${account.address} holds ${fmt(balance)}, the payment needs ${fmt(plan.totalAtomic)}`);
  }
  const mined = async (hash: Hash) => {
    const receipt = await publicClient.waitForTransactionReceipt({ hash, pollingInterval: RECEIPT_POLL_MS, timeout: RECEIPT_TIMEOUT_MS });
    if (receipt.status !== 'success') throw new PayCommandError(`transaction ${hash} reverted`);
    return receipt;
  };

  if (plan.kind === 'transfer') {
    const hash = await wallet.writeContract({ address: plan.token, abi: TEST_USDC_ABI, functionName: 'transfer', args: [plan.to, plan.totalAtomic] });
    const receipt = await mined(hash);
    return { from: account.address, txHash: hash, blockNumber: receipt.blockNumber, approveTxHash: null };
  }

  let approveTxHash: Hash | null = null;
  const allowance = await publicClient.readContract({ address: plan.token, abi: TEST_USDC_ABI, functionName: 'allowance', args: [account.address, plan.proxy] });
  if (allowance < plan.totalAtomic) {
    approveTxHash = await wallet.writeContract({ address: plan.token, abi: TEST_USDC_ABI, functionName: 'approve', args: [plan.proxy, plan.totalAtomic] });
    await mined(approveTxHash);
  }
  const hash = await wallet.writeContract({
    address: plan.proxy,
    abi: FEE_PROXY_ABI,
    functionName: 'transferFromWithReferenceAndFee',
    args: [plan.token, plan.to, plan.amountAtomic, plan.reference, plan.feeAtomic, plan.feeAddress],
  });
  const receipt = await mined(hash);
  if (parseEventLogs({ abi: FEE_PROXY_ABI, eventName: 'TransferWithReferenceAndFee', logs: receipt.logs }).length !== 1) {
    throw new PayCommandError(`transaction ${hash} emitted no TransferWithReferenceAndFee (is ${plan.proxy} the fee proxy?)`);
  }
  return { from: account.address, txHash: hash, blockNumber: receipt.blockNumber, approveTxHash };
}

/** What `npm run pay` prints once the payment is mined. */
export function paidMessage(inv: Pick<InvoiceToPay, 'code' | 'id'>, plan: PaymentPlan, sent: SentPayment, confirmations: number | null): string[] {
  const fmt = (v: bigint) => `${formatUnits(v, plan.tokenDecimals)} ${plan.currency}`;
  const what =
    plan.kind === 'proxy'
      ? `${fmt(plan.totalAtomic)} through the fee proxy (${fmt(plan.amountAtomic)} to ${plan.to}, fee ${fmt(plan.feeAtomic)}), reference ${plan.reference}`
      : `${fmt(plan.totalAtomic)} by plain transfer to ${plan.to}`;
  const wait = confirmations === null ? '' : ` (the service counts it once ${confirmations} more block${confirmations === 1 ? ' is' : 's are'} on top)`;
  return [`Paid ${name(inv)} from ${sent.from}: ${what}.`, `transaction ${sent.txHash} in block ${sent.blockNumber}${wait}`];
}
