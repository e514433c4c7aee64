// The payment page's "Pay with wallet": runs in the payer's browser, bundled with viem into one
// file (src/page/wallet-script.ts) that the page loads from its own origin. Everything it needs
// comes from the page's data attributes and GET /pay/<reference>/status; it never sees a secret.
// Without this script (or without a wallet) the page still shows how to pay by hand.
import {
  createPublicClient,
  createWalletClient,
  custom,
  erc20Abi,
  formatUnits,
  type Address,
  type EIP1193Provider,
  type Hash,
  type Hex,
} from 'viem';
import { FEE_PROXY_ABI } from '../../chain/abi.js';
import { firstLine } from '../../lib/first-line.js';
import type { PaymentPageStatus, SubscriptionCheckoutAnswer, SubscriptionCheckoutStatus } from '../../http/schemas/payment-page.js';

// The SubscriptionManager's subscribe(Terms) (contracts/SubscriptionManager.sol), written out: the
// human-readable ABI parser would add its weight to the bundle.
const SUBSCRIBE_ABI = [
  {
    type: 'function',
    name: 'subscribe',
    stateMutability: 'nonpayable',
    inputs: [
      {
        name: 'terms',
        type: 'tuple',
        components: [
          { name: 'payee', type: 'address' },
          { name: 'token', type: 'address' },
          { name: 'amount', type: 'uint96' },
          { name: 'period', type: 'uint32' },
          { name: 'feeBps', type: 'uint16' },
          { name: 'feeAddress', type: 'address' },
          { name: 'operator', type: 'address' },
          { name: 'endsAt', type: 'uint40' },
          { name: 'checkoutReference', type: 'bytes32' },
        ],
      },
    ],
    outputs: [{ name: 'id', type: 'uint256' }],
  },
] as const;
/** How often the page asks its status while a payment confirms. */
const STATUS_POLL_MS = 1500;
/** How often viem asks the wallet for a receipt (its default for a custom transport is 4 s). */
const RECEIPT_POLL_MS = 1000;
/** EIP-1193: the user rejected the request. */
const USER_REJECTED = 4001;
/** EIP-3326: the wallet does not know the chain it was asked to switch to. */
const UNKNOWN_CHAIN = 4902;

/** The status endpoint's answer, as its one schema says (src/http/schemas/payment-page.ts). */
type Status = PaymentPageStatus;
type WalletChain = NonNullable<Status['chain']>;

interface Announced {
  info: { name: string; rdns?: string };
  provider: EIP1193Provider;
}

// EIP-6963: wallets announce themselves when asked; listen first, then ask, at load, so they are
// known by the time the payer clicks.
const announced: Announced[] = [];
window.addEventListener('eip6963:announceProvider', (event) => {
  const detail = (event as CustomEvent<Announced>).detail;
  if (detail?.provider && !announced.some((a) => a.provider === detail.provider)) announced.push(detail);
});
window.dispatchEvent(new Event('eip6963:requestProvider'));

function discoverProvider(): EIP1193Provider | null {
  if (announced.length > 0) return announced[0].provider;
  const legacy = (window as unknown as { ethereum?: EIP1193Provider }).ethereum;
  return legacy ?? null;
}

/** The EIP-1193 code of an error, wherever a wallet or viem nested it. */
function errorCode(err: unknown): number | null {
  for (let e: unknown = err, depth = 0; e && typeof e === 'object' && depth < 8; depth++) {
    const o = e as { code?: unknown; data?: { originalError?: { code?: unknown } }; cause?: unknown };
    if (typeof o.code === 'number' && o.code !== -32603) return o.code;
    if (typeof o.data?.originalError?.code === 'number') return o.data.originalError.code;
    e = o.cause;
  }
  return null;
}

/**
 * The wallet could not pay the network's fee: viem's InsufficientFundsError (its text, "The total
 * cost (gas * gas fee + value) ...", means nothing to a payer) or a node's "insufficient funds".
 */
function isShortOfGas(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e && typeof e === 'object' && depth < 8; depth++) {
    const o = e as { name?: unknown; message?: unknown; details?: unknown; cause?: unknown };
    if (o.name === 'InsufficientFundsError') return true;
    if ([o.message, o.details].some((m) => typeof m === 'string' && /insufficient funds/i.test(m))) return true;
    e = o.cause;
  }
  return false;
}

/**
 * An amount as the page prints every other (src/domain/invoice-format.ts formatTokenAmount): the
 * page's language, at least two decimals, every significant digit ("1,235.50").
 */
function formatAmount(atomic: bigint, decimals: number): string {
  const plain = formatUnits(atomic, decimals);
  const places = Math.min(Math.max(plain.split('.')[1]?.length ?? 0, 2), decimals);
  const format = new Intl.NumberFormat(document.documentElement.lang || 'en', { minimumFractionDigits: places, maximumFractionDigits: places });
  // Intl.NumberFormat v3 takes a decimal string and keeps every digit; the type says number.
  return format.format(plain as unknown as number);
}

class Stop extends Error {}

type Say = (text: string, state?: string) => void;
type Translate = (key: string, values?: Record<string, string | number>) => string;

/**
 * Moves the wallet to the target chain, adding it when the wallet does not know it and the
 * deployment names a public RPC URL. `chain` null: the deployment does not describe the chain; the
 * wallet may still know it.
 */
async function switchChain(provider: EIP1193Provider, target: { chain_id: number; network: string }, chain: WalletChain | null, say: Say, t: Translate): Promise<void> {
  const current = Number(await provider.request({ method: 'eth_chainId' }));
  if (current === target.chain_id) return;
  const chainId = `0x${target.chain_id.toString(16)}` as Hex;
  say(t('wallet.switching', { network: target.network }));
  try {
    await provider.request({ method: 'wallet_switchEthereumChain', params: [{ chainId }] });
  } catch (err) {
    if (errorCode(err) !== UNKNOWN_CHAIN) throw err;
    if (!chain?.rpc_url) {
      say(t('wallet.addNetwork', { network: target.network, chainId: target.chain_id }), 'error');
      throw new Stop();
    }
    await provider.request({
      method: 'wallet_addEthereumChain',
      params: [
        {
          chainId,
          chainName: chain.name,
          rpcUrls: [chain.rpc_url],
          nativeCurrency: { name: chain.native_symbol, symbol: chain.native_symbol, decimals: 18 },
          blockExplorerUrls: chain.explorer_url ? [chain.explorer_url] : undefined,
        },
      ],
    });
  }
}

function setUp(root: HTMLElement): void {
  const button = root.querySelector<HTMLButtonElement>('#pay-with-wallet');
  const line = root.querySelector<HTMLElement>('#payment-status');
  if (!button || !line) return;
  const messages = JSON.parse(root.dataset.messages ?? '{}') as Record<string, string>;
  const t = (key: string, values: Record<string, string | number> = {}) =>
    (messages[key] ?? key).replace(/\{\{(\w+)\}\}/g, (_m, name: string) => String(values[name] ?? ''));
  const checkoutUrl = root.dataset.checkoutUrl ?? null;
  let statusUrl = root.dataset.statusUrl ?? null;
  /** The network's own token, which pays the fee: named when the wallet is short of it. */
  let feeToken = { symbol: 'ETH', network: '' };

  const say = (text: string, state = 'info') => {
    line.textContent = text;
    line.dataset.state = state;
  };
  const sayTx = (text: string, hash: Hash, explorer: string | null) => {
    line.textContent = `${text} `;
    line.dataset.state = 'info';
    const code = document.createElement('code');
    code.textContent = hash;
    if (explorer) {
      const a = document.createElement('a');
      a.href = `${explorer.replace(/\/+$/, '')}/tx/${hash}`;
      a.rel = 'noopener noreferrer';
      a.target = '_blank';
      a.append(code);
      line.append(a);
    } else {
      line.append(code);
    }
  };

  /** Paid: a payment link adds its confirmation message, or sends the payer to its redirect. */
  function paid(): void {
    const note = root.dataset.confirmationMessage;
    say(note ? `${t('wallet.paid')} ${note}` : t('wallet.paid'), 'paid');
    button!.hidden = true;
    // A payment link's fields are in the form around the button.
    for (const input of Array.from(root.closest('form')?.querySelectorAll<HTMLInputElement>('input') ?? [])) input.disabled = true;
    const redirect = root.dataset.redirectUrl;
    if (redirect) window.location.assign(redirect);
  }

  async function fetchStatus(): Promise<Status> {
    const res = await fetch(statusUrl!, { headers: { accept: 'application/json' }, cache: 'no-store' });
    if (!res.ok) throw new Error(`status ${res.status}`);
    return (await res.json()) as Status;
  }

  /**
   * An invoice's page becomes the state it reports: the page is fetched again from its own origin
   * and its content replaces this one, so what the payer sees is exactly what a reload shows (one
   * renderer, the server's). Partially paid: the new page's button pays the rest.
   */
  async function becomeCurrentState(note: { text: string; state: string } | null): Promise<void> {
    const res = await fetch(window.location.href, { headers: { accept: 'text/html' }, cache: 'no-store' });
    if (!res.ok) throw new Error(`page ${res.status}`);
    const fresh = new DOMParser().parseFromString(await res.text(), 'text/html').querySelector('main');
    const current = document.querySelector('main');
    if (!fresh || !current) throw new Error('the page has no main');
    current.replaceWith(document.adoptNode(fresh));
    const next = document.getElementById('wallet-pay');
    if (!next) return;
    setUp(next);
    const nextLine = next.querySelector<HTMLElement>('#payment-status');
    if (note && nextLine) {
      nextLine.textContent = note.text;
      nextLine.dataset.state = note.state;
    }
  }

  /** becomeCurrentState, or false when the page could not be fetched (this page then says the state itself). */
  async function becameCurrentState(note: { text: string; state: string } | null): Promise<boolean> {
    try {
      await becomeCurrentState(note);
      return true;
    } catch {
      return false;
    }
  }

  /** A payment link: an invoice of the link for the chosen amount, made once per amount. */
  let checkoutFor: string | null = null;
  async function checkout(): Promise<void> {
    const amountInput = document.querySelector<HTMLInputElement>('#wallet-amount');
    const emailInput = document.querySelector<HTMLInputElement>('#wallet-email');
    const amount = amountInput ? amountInput.value.trim() : undefined;
    const email = emailInput && emailInput.value.trim() !== '' ? emailInput.value.trim() : undefined;
    // The receipt goes to this address: asked for in words, not in the API's.
    if (emailInput && (email === undefined || !emailInput.checkValidity())) {
      say(t('wallet.emailNeeded'), 'error');
      emailInput.focus();
      throw new Stop();
    }
    const key = `${amount ?? ''}|${email ?? ''}`;
    if (statusUrl && checkoutFor === key) return;
    say(t('wallet.checkout'));
    const res = await fetch(checkoutUrl!, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json' },
      body: JSON.stringify({ amount, customer_email: email }),
    });
    const body = (await res.json()) as { status_url?: string; error?: { message?: string } };
    if (!res.ok || !body.status_url) {
      const message = body.error?.message ?? null;
      say(message !== null && /^customer_email\b/.test(message) ? t('wallet.emailNeeded') : (message ?? t('wallet.failed', { message: String(res.status) })), 'error');
      throw new Stop();
    }
    statusUrl = new URL(body.status_url, window.location.href).href;
    checkoutFor = key;
  }

  async function pay(): Promise<void> {
    const provider = discoverProvider();
    if (!provider) {
      say(t('wallet.noWallet'), 'error');
      return;
    }
    if (checkoutUrl) await checkout();
    let status = await fetchStatus();
    const inst = status.instructions;
    if (status.status === 'paid') {
      paid();
      return;
    }
    if (!inst) {
      say(t('wallet.nothingDue'));
      return;
    }
    say(t('wallet.connecting'));
    const [account] = (await provider.request({ method: 'eth_requestAccounts' })) as Address[];
    if (!account) throw new Error('the wallet shared no account');
    await switchChain(provider, inst, status.chain, say, t);

    const transport = custom(provider);
    const publicClient = createPublicClient({ transport, pollingInterval: RECEIPT_POLL_MS });
    const wallet = createWalletClient({ account, transport, pollingInterval: RECEIPT_POLL_MS });
    const total = BigInt(inst.total_atomic);
    const fmt = (v: bigint) => formatAmount(v, inst.token_decimals);
    const currency = status.currency;
    const token = inst.token_address as Address;
    const proxy = inst.proxy_address as Address;
    feeToken = { symbol: status.chain?.native_symbol ?? 'ETH', network: inst.network };
    const gasShort = () => say(t('wallet.gas', feeToken), 'error');

    say(t('wallet.checking'));
    const balance = await publicClient.readContract({ address: token, abi: erc20Abi, functionName: 'balanceOf', args: [account] });
    if (balance < total) {
      say(t('wallet.short', { balance: fmt(balance), amount: fmt(total), currency }), 'error');
      return;
    }
    // The token is there but nothing pays the network's fee: say so before the wallet refuses.
    if ((await publicClient.getBalance({ address: account })) === 0n) {
      gasShort();
      return;
    }
    const allowance = await publicClient.readContract({ address: token, abi: erc20Abi, functionName: 'allowance', args: [account, proxy] });
    if (allowance < total) {
      say(t('wallet.approve', { amount: fmt(total), currency }));
      const approval = await wallet.writeContract({ chain: null, address: token, abi: erc20Abi, functionName: 'approve', args: [proxy, total] });
      say(t('wallet.approving'));
      const receipt = await publicClient.waitForTransactionReceipt({ hash: approval });
      if (receipt.status !== 'success') throw new Error('the approval failed on-chain');
    }
    say(t('wallet.confirmPay', { amount: fmt(total), currency }));
    const hash = await wallet.writeContract({
      chain: null,
      address: proxy,
      abi: FEE_PROXY_ABI,
      functionName: 'transferFromWithReferenceAndFee',
      args: [token, inst.to as Address, BigInt(inst.amount_atomic), inst.payment_reference as Hex, BigInt(inst.fee_atomic), inst.fee_address as Address],
    });
    const explorer = status.chain?.explorer_url ?? null;
    sayTx(t('wallet.sent'), hash, explorer);
    // The page's own view of the payment (the service's watcher), until it is final one way or the other.
    for (;;) {
      await new Promise((resolve) => setTimeout(resolve, STATUS_POLL_MS));
      try {
        status = await fetchStatus();
      } catch {
        continue;
      }
      const mine = status.payments.find((p) => p.tx_hash.toLowerCase() === hash.toLowerCase());
      if (status.status === 'paid') {
        if (checkoutUrl || !(await becameCurrentState(null))) paid();
        return;
      }
      if (!mine) continue;
      if (mine.status === 'removed') {
        say(t('wallet.removed'), 'error');
        return;
      }
      if (mine.status === 'pending') {
        // Pending means short of the chain's confirmations: a head a worker recorded ahead of the
        // run that confirms it must not read "confirming 2 of 2" while it still waits.
        const n = Math.min(mine.confirmations, Math.max(0, status.required_confirmations - 1));
        sayTx(t('wallet.confirming', { n, total: status.required_confirmations }), hash, explorer);
        continue;
      }
      // Confirmed and applied, yet the invoice is not paid: a partial payment. What remains is
      // payable with the next click (fresh instructions from the status).
      const note = { text: t('wallet.partial', { remaining: fmt(BigInt(status.amount_remaining_atomic)), currency }), state: 'partial' };
      if (checkoutUrl || !(await becameCurrentState(note))) {
        say(note.text, note.state);
        button!.textContent = t('wallet.buttonRest');
      }
      return;
    }
  }

  runOnClick(button, pay, say, t, () => feeToken);
  root.hidden = false;
  // A payment link's form holds the wallet's fields: shown with the button (it is the only way to pay there without the sandbox).
  document.getElementById('link-pay')?.removeAttribute('hidden');
}


/**
 * "Subscribe with wallet" (a recurring price's link): makes the subscription checkout (POST
 * .../subscribe: the exact terms), approves the SubscriptionManager when the allowance is short of
 * the first period, calls subscribe(terms) (which pays the first period), then follows the
 * checkout until the service saw the subscription confirmed: "confirming n of N", "subscribed".
 */
function setUpSubscription(root: HTMLElement): void {
  const button = root.querySelector<HTMLButtonElement>('#subscribe-with-wallet');
  const line = root.querySelector<HTMLElement>('#subscription-status');
  if (!button || !line) return;
  const messages = JSON.parse(root.dataset.messages ?? '{}') as Record<string, string>;
  const t: Translate = (key, values = {}) => (messages[key] ?? key).replace(/\{\{(\w+)\}\}/g, (_m, name: string) => String(values[name] ?? ''));
  const subscribeUrl = root.dataset.subscribeUrl!;
  let feeToken = { symbol: 'ETH', network: '' };
  const say: Say = (text, state = 'info') => {
    line.textContent = text;
    line.dataset.state = state;
  };
  const sayTx = (text: string, hash: Hash) => {
    line.textContent = `${text} `;
    line.dataset.state = 'info';
    const code = document.createElement('code');
    code.textContent = hash;
    line.append(code);
  };

  async function checkout(): Promise<SubscriptionCheckoutAnswer> {
    const emailInput = document.querySelector<HTMLInputElement>('#subscription-email');
    const email = emailInput ? emailInput.value.trim() : '';
    if (!emailInput || email === '' || !emailInput.checkValidity()) {
      say(t('wallet.emailNeeded'), 'error');
      emailInput?.focus();
      throw new Stop();
    }
    say(t('sub.preparing'));
    const res = await fetch(subscribeUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json' },
      body: JSON.stringify({ customer_email: email }),
    });
    const body = (await res.json()) as SubscriptionCheckoutAnswer & { error?: { message?: string } };
    if (!res.ok || !body.terms) {
      say(body.error?.message ?? t('wallet.failed', { message: String(res.status) }), 'error');
      throw new Stop();
    }
    return body;
  }

  async function fetchStatus(url: string): Promise<SubscriptionCheckoutStatus> {
    const res = await fetch(url, { headers: { accept: 'application/json' }, cache: 'no-store' });
    if (!res.ok) throw new Error(`status ${res.status}`);
    return (await res.json()) as SubscriptionCheckoutStatus;
  }

  function subscribed(): void {
    say(t('sub.subscribed'), 'paid');
    button!.hidden = true;
    const email = document.querySelector<HTMLInputElement>('#subscription-email');
    if (email) email.disabled = true;
  }

  async function subscribe(): Promise<void> {
    const provider = discoverProvider();
    if (!provider) {
      say(t('wallet.noWallet'), 'error');
      return;
    }
    const answer = await checkout();
    say(t('wallet.connecting'));
    const [account] = (await provider.request({ method: 'eth_requestAccounts' })) as Address[];
    if (!account) throw new Error('the wallet shared no account');
    await switchChain(provider, answer, answer.chain, say, t);
    const transport = custom(provider);
    const publicClient = createPublicClient({ transport, pollingInterval: RECEIPT_POLL_MS });
    const wallet = createWalletClient({ account, transport, pollingInterval: RECEIPT_POLL_MS });
    const terms = answer.terms;
    const amount = BigInt(terms.amount);
    const token = terms.token as Address;
    const contract = answer.contract_address as Address;
    const fmt = (v: bigint) => formatAmount(v, answer.token_decimals);
    const currency = answer.currency;
    feeToken = { symbol: answer.chain?.native_symbol ?? 'ETH', network: answer.network };

    say(t('wallet.checking'));
    const balance = await publicClient.readContract({ address: token, abi: erc20Abi, functionName: 'balanceOf', args: [account] });
    if (balance < amount) {
      say(t('wallet.short', { balance: fmt(balance), amount: fmt(amount), currency }), 'error');
      return;
    }
    if ((await publicClient.getBalance({ address: account })) === 0n) {
      say(t('wallet.gas', feeToken), 'error');
      return;
    }
    // Only when short: an allowance already there (an earlier subscription) is not asked again.
    const allowance = await publicClient.readContract({ address: token, abi: erc20Abi, functionName: 'allowance', args: [account, contract] });
    if (allowance < amount) {
      const asked = BigInt(answer.allowance_atomic);
      say(t('sub.approve', { amount: fmt(asked), currency }));
      const approval = await wallet.writeContract({ chain: null, address: token, abi: erc20Abi, functionName: 'approve', args: [contract, asked] });
      say(t('wallet.approving'));
      const receipt = await publicClient.waitForTransactionReceipt({ hash: approval });
      if (receipt.status !== 'success') throw new Error('the approval failed on-chain');
    }
    say(t('sub.confirm', { amount: fmt(amount), currency }));
    // The terms exactly as the service gave them: the watcher makes a subscription only from these.
    const hash = await wallet.writeContract({
      chain: null,
      address: contract,
      abi: SUBSCRIBE_ABI,
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
    sayTx(t('wallet.sent'), hash);
    const receipt = await publicClient.waitForTransactionReceipt({ hash });
    if (receipt.status !== 'success') throw new Error('the subscription was refused on-chain');
    const statusUrl = new URL(answer.status_url, window.location.href).href;
    for (;;) {
      let status: SubscriptionCheckoutStatus;
      try {
        status = await fetchStatus(statusUrl);
      } catch {
        await new Promise((resolve) => setTimeout(resolve, STATUS_POLL_MS));
        continue;
      }
      if (status.status === 'subscribed') {
        subscribed();
        return;
      }
      if (status.status === 'expired') {
        say(t('sub.expired'), 'error');
        return;
      }
      // The service's view of the subscribe call once its watcher saw it; until then, the chain's.
      const mine = status.payments.find((p) => p.tx_hash.toLowerCase() === hash.toLowerCase());
      if (mine?.status === 'removed') {
        say(t('wallet.removed'), 'error');
        return;
      }
      const head = await publicClient.getBlockNumber().catch(() => receipt.blockNumber);
      const seen = mine ? mine.confirmations : Number(head - receipt.blockNumber);
      sayTx(t('wallet.confirming', { n: Math.max(0, Math.min(seen, status.required_confirmations)), total: status.required_confirmations }), hash);
      await new Promise((resolve) => setTimeout(resolve, STATUS_POLL_MS));
    }
  }

  runOnClick(button, subscribe, say, t, () => feeToken);
  root.hidden = false;
}

const root = document.getElementById('wallet-pay');
if (root) setUp(root);
const subscriptionRoot = document.getElementById('subscription-pay');
if (subscriptionRoot) setUpSubscription(subscriptionRoot);

/** One wallet action per click: the button is off while it runs; a refusal or a failure is said in words. */
function runOnClick(button: HTMLButtonElement, action: () => Promise<void>, say: Say, t: Translate, feeToken: () => { symbol: string; network: string }): void {
  let busy = false;
  button.addEventListener('click', () => {
    if (busy) return;
    busy = true;
    button.disabled = true;
    action()
      .catch((err: unknown) => {
        if (err instanceof Stop) return;
        if (errorCode(err) === USER_REJECTED) say(t('wallet.rejected'), 'rejected');
        else if (isShortOfGas(err)) say(t('wallet.gas', feeToken()), 'error');
        else say(t('wallet.failed', { message: firstLine(err) }), 'error');
      })
      .finally(() => {
        busy = false;
        button.disabled = false;
      });
  });
}
