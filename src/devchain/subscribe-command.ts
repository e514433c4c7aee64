// `npm run subscribe` (main/subscribe.ts): subscribes to a recurring price's payment link on the
// local chain from a funded test account, as the link page's "Subscribe with wallet" does: the
// subscription checkout from the running API (POST /pay/<link id>/subscribe, the exact terms), an
// approve when the allowance is short, then subscribe(terms). What it reads and refuses are plain
// functions here (unit-tested); startCheckout and sendSubscription do the I/O.
import { formatUnits, parseEventLogs, type Address, type Hash, type Hex } from 'viem';
import { SUBSCRIPTION_MANAGER_ABI } from '../chain/subscription-manager-abi.js';
import type { Chain } from '../domain/chains.js';
import { LOCAL_CHAIN_ID } from '../domain/chains.js';
import type { SubscriptionCheckoutAnswer } from '../http/schemas/payment-page.js';
import { TEST_USDC_ABI } from './contracts.js';
import { firstLine } from '../lib/first-line.js';
import { connectLocalSigner, DEFAULT_PAYER, localRpcUrl } from './pay-command.js';

export const SUBSCRIBE_USAGE = 'npm run subscribe -- <payment link id | payment page URL> [--email <address>] [--key <private key>]';

/** Refused before anything is sent: main/subscribe.ts prints the message as one line and exits 1. */
export class SubscribeCommandError extends Error {}

/** The receipts' address when `--email` is not given. */
export const DEFAULT_SUBSCRIBER_EMAIL = 'subscriber@example.test';

export interface SubscribeCommandOptions {
  /** A payment link id, or its page URL. */
  handle: string;
  email: string;
  /** Who subscribes: default anvil's account 0. */
  privateKey: Hex;
}

function optionValue(args: readonly string[], i: number, name: string): string {
  if (i + 1 >= args.length) throw new SubscribeCommandError(`${name} needs a value (usage: ${SUBSCRIBE_USAGE})`);
  return args[i + 1];
}

/** Reads the arguments after `npm run subscribe --`. */
export function subscribeCommandOptions(args: readonly string[]): SubscribeCommandOptions {
  const positional: string[] = [];
  let email: string | null = null;
  let privateKey: string | null = null;
  for (let i = 0; i < args.length; i += 1) {
    const arg = args[i];
    if (arg === '--email') email = optionValue(args, i++, '--email');
    else if (arg.startsWith('--email=')) email = arg.slice('--email='.length);
    else if (arg === '--key') privateKey = optionValue(args, i++, '--key');
    else if (arg.startsWith('--key=')) privateKey = arg.slice('--key='.length);
    else if (arg.startsWith('--')) throw new SubscribeCommandError(`unknown option "${arg}" (usage: ${SUBSCRIBE_USAGE})`);
    else positional.push(arg);
  }
  if (positional.length === 0) throw new SubscribeCommandError(`which payment link? (usage: ${SUBSCRIBE_USAGE})`);
  if (positional.length > 1) throw new SubscribeCommandError(`unexpected argument "${positional[1].slice(0, 80)}" (usage: ${SUBSCRIBE_USAGE})`);
  // Never echoed: it is a private key, even if a test one.
  if (privateKey !== null && !/^0x[0-9a-fA-F]{64}$/.test(privateKey)) throw new SubscribeCommandError('--key must be a private key: 0x and 64 hexadecimal characters');
  if (email !== null && !/^[^@\s]+@[^@\s]+$/.test(email)) throw new SubscribeCommandError(`--email must be an email address, not "${email.slice(0, 80)}"`);
  return { handle: positional[0].trim(), email: email ?? DEFAULT_SUBSCRIBER_EMAIL, privateKey: (privateKey as Hex | null) ?? DEFAULT_PAYER.privateKey };
}

export interface LinkTarget {
  linkId: string;
  /** `POST <page base>/<link id>/subscribe`. */
  subscribeUrl: string;
  /** The page's origin: the checkout is made as the page's own script makes it. */
  origin: string;
}

/**
 * The link and where its page is: a page URL names both; a bare link id is on `pageBase`
 * (PAYMENT_PAGE_BASE, the API `npm start` serves).
 */
export function linkTarget(handle: string, pageBase: string): LinkTarget {
  let page: URL;
  if (/^https?:\/\//i.test(handle)) {
    try {
      page = new URL(handle);
    } catch {
      throw new SubscribeCommandError(`"${handle.slice(0, 80)}" is not a URL`);
    }
  } else {
    page = new URL(`${pageBase.replace(/\/+$/, '')}/${encodeURIComponent(handle)}`);
  }
  const segments = page.pathname.split('/').filter((s) => s !== '');
  const linkId = decodeURIComponent(segments.at(-1) ?? '');
  if (!/^plink_[0-9A-Za-z]{1,58}$/.test(linkId)) {
    throw new SubscribeCommandError(`"${handle.slice(0, 80)}" names no payment link: give its id (plink_...) or its page URL`);
  }
  page.search = '';
  page.hash = '';
  return { linkId, subscribeUrl: `${page.href.replace(/\/+$/, '')}/subscribe`, origin: page.origin };
}

/** Makes the subscription checkout from the API; its refusal (an inactive product, no contract...) is the command's, in its words. */
export async function startCheckout(target: LinkTarget, email: string): Promise<SubscriptionCheckoutAnswer> {
  let res: Response;
  try {
    res = await fetch(target.subscribeUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json', origin: target.origin, 'sec-fetch-site': 'same-origin' },
      body: JSON.stringify({ customer_email: email }),
    });
  } catch (err) {
    throw new SubscribeCommandError(`no API answers at ${target.origin} (${firstLine(err)}): is npm start running?`);
  }
  const body = (await res.json().catch(() => null)) as (SubscriptionCheckoutAnswer & { error?: { message?: string } }) | null;
  if (!res.ok || !body?.terms) {
    throw new SubscribeCommandError(`payment link ${target.linkId} cannot be subscribed to: ${body?.error?.message ?? `the API answered ${res.status}`}`);
  }
  return body;
}

export interface SubscriptionPlan {
  rpcUrl: string;
  answer: SubscriptionCheckoutAnswer;
}

/** Where to send: the checkout's chain as configured here, refused unless it is a local one. */
export function planSubscription(answer: SubscriptionCheckoutAnswer, chain: Chain | undefined): SubscriptionPlan {
  if (!chain) throw new SubscribeCommandError(`the subscription is on chain ${answer.chain_id}, which is not configured here (CHAINS_FILE, or var/chain/chains.json of npm run chain)`);
  const rpcUrl = localRpcUrl(chain);
  if (rpcUrl === null) {
    throw new SubscribeCommandError(
      `the subscription is on ${chain.network} (chain ${chain.chainId}), not a local chain: npm run subscribe sends only on network local or chain ${LOCAL_CHAIN_ID} at a loopback RPC URL`,
    );
  }
  return { rpcUrl, answer };
}

export interface SentSubscription {
  from: Address;
  txHash: Hash;
  blockNumber: bigint;
  /** The subscription's id on the contract (the API's onchain_id once the service saw it). */
  onchainId: bigint;
  approveTxHash: Hash | null;
}

const RECEIPT_POLL_MS = 100;
const RECEIPT_TIMEOUT_MS = 60_000;

/** Approves the contract when the allowance is short of the first period, then subscribe(terms); resolves with the mined call. */
export async function sendSubscription(plan: SubscriptionPlan, privateKey: Hex): Promise<SentSubscription> {
  const { answer } = plan;
  const { account, publicClient, wallet } = await connectLocalSigner(answer.chain_id, plan.rpcUrl, privateKey, 'the subscription', (m) => new SubscribeCommandError(m));
  const terms = answer.terms;
  const token = terms.token as Address;
  const contract = answer.contract_address as Address;
  const amount = BigInt(terms.amount);
  const balance = await publicClient.readContract({ address: token, abi: TEST_USDC_ABI, functionName: 'balanceOf', args: [account.address] });
  if (balance < amount) {
    const fmt = (v: bigint) => `${formatUnits(v, answer.token_decimals)} ${answer.currency}`;
    throw new SubscribeCommandError(`${account.address} holds ${fmt(balance)}, the first period needs ${fmt(amount)}`);
  }
  const mined = async (hash: Hash) => {
    const receipt = await publicClient.waitForTransactionReceipt({ hash, pollingInterval: RECEIPT_POLL_MS, timeout: RECEIPT_TIMEOUT_MS });
    if (receipt.status !== 'success') throw new SubscribeCommandError(`transaction ${hash} reverted`);
    return receipt;
  };
  let approveTxHash: Hash | null = null;
  const allowance = await publicClient.readContract({ address: token, abi: TEST_USDC_ABI, functionName: 'allowance', args: [account.address, contract] });
  if (allowance < amount) {
    approveTxHash = await wallet.writeContract({ address: token, abi: TEST_USDC_ABI, functionName: 'approve', args: [contract, BigInt(answer.allowance_atomic)] });
    await mined(approveTxHash);
  }
  const hash = await wallet.writeContract({
    address: contract,
    abi: SUBSCRIPTION_MANAGER_ABI,
    functionName: 'subscribe',
    args: [
      {
        payee: terms.payee as Address,
        token,
        amount,
        period: terms.period,
        feeBps: terms.fee_bps,
        feeAddress: terms.fee_address as Address,
        operator: terms.operator as Address,
        endsAt: terms.ends_at,
        checkoutReference: terms.checkout_reference as Hex,
      },
    ],
  });
  const receipt = await mined(hash);
  const [event] = parseEventLogs({ abi: SUBSCRIPTION_MANAGER_ABI, eventName: 'Subscribed', logs: receipt.logs });
  if (!event) throw new SubscribeCommandError(`transaction ${hash} emitted no Subscribed (is ${contract} the SubscriptionManager?)`);
  return { from: account.address, txHash: hash, blockNumber: receipt.blockNumber, onchainId: event.args.id, approveTxHash };
}

/** What `npm run subscribe` prints once the subscribe call is mined: the transaction hash on a line of its own. */
export function subscribedMessage(target: LinkTarget, answer: SubscriptionCheckoutAnswer, sent: SentSubscription, confirmations: number | null): string[] {
  const fmt = (v: string) => `${formatUnits(BigInt(v), answer.token_decimals)} ${answer.currency}`;
  const wait = confirmations === null ? '' : `; the service makes the subscription once ${confirmations} more block${confirmations === 1 ? ' is' : 's are'} on top`;
  return [
    `Subscribed to payment link ${target.linkId} from ${sent.from}: ${fmt(answer.terms.amount)} every ${answer.terms.period} s, the first period paid now (subscription ${sent.onchainId} on ${answer.contract_address}${wait}).`,
    `transaction ${sent.txHash} in block ${sent.blockNumber}`,
  ];
}
