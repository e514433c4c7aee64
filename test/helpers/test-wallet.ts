// A test wallet for the payment page in a real browser: an EIP-1193 provider injected before the
// page loads (addInitScript) that announces itself with EIP-6963 and forwards every request to
// the test's anvil through a Playwright binding (the page's CSP allows no fetch to the chain, and a
// binding is not a fetch). anvil's unlocked well-known accounts sign eth_sendTransaction. The test
// chooses the account it reports, the chain it starts on, and requests to reject once with 4001.
import type { Page } from 'playwright-core';

export interface TestWallet {
  /** The account eth_requestAccounts answers (a funded payer, or a fresh empty address). */
  account: string;
  /** The chain the wallet is on at first (hex); wallet_switchEthereumChain moves it. */
  chainId: string;
  /** Chains the wallet knows besides anvil's own (hex); switching to another one is error 4902 until it is added. */
  knownChains: Set<string>;
  /** Methods whose next request the "user" rejects (4001), once each. */
  rejectOnce: Set<string>;
  /** Every request the page made, in order. */
  requests: { method: string; params: unknown }[];
  /** The parameters of each wallet_addEthereumChain. */
  added: unknown[];
}

type Answer = { result: unknown } | { error: { code: number; message: string } };

/** Installs the wallet on `page` (before its first navigation); returns its state to steer and inspect. */
export async function installTestWallet(page: Page, rpcUrl: string, account: string): Promise<TestWallet> {
  const wallet: TestWallet = { account, chainId: '0x7a69', knownChains: new Set(['0x7a69']), rejectOnce: new Set(), requests: [], added: [] };
  let nextId = 1;
  const forward = async (method: string, params: unknown): Promise<Answer> => {
    const res = await fetch(rpcUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: nextId++, method, params: params ?? [] }),
    });
    const body = (await res.json()) as { result?: unknown; error?: { code: number; message: string } };
    return body.error ? { error: body.error } : { result: body.result };
  };
  await page.exposeFunction('__testWalletRequest', async (method: string, params: unknown): Promise<Answer> => {
    wallet.requests.push({ method, params });
    if (wallet.rejectOnce.delete(method)) return { error: { code: 4001, message: 'User rejected the request.' } };
    switch (method) {
      case 'eth_requestAccounts':
      case 'eth_accounts':
        return { result: [wallet.account] };
      case 'eth_chainId':
        return { result: wallet.chainId };
      case 'wallet_switchEthereumChain': {
        const target = (params as [{ chainId: string }])[0].chainId;
        if (!wallet.knownChains.has(target)) return { error: { code: 4902, message: `Unrecognized chain ID "${target}".` } };
        wallet.chainId = target;
        return { result: null };
      }
      case 'wallet_addEthereumChain': {
        const p = (params as [{ chainId: string }])[0];
        wallet.added.push(p);
        wallet.knownChains.add(p.chainId);
        wallet.chainId = p.chainId;
        return { result: null };
      }
      default:
        // A wallet sends from the account it reports, whatever the page asks.
        if (method === 'eth_sendTransaction') (params as [{ from: string }])[0].from = wallet.account;
        return forward(method, params);
    }
  });
  await page.addInitScript(() => {
    // Runs in the page (the test's tsconfig has no DOM types: the few browser names it uses, typed here).
    const window = globalThis as unknown as {
      __testWalletRequest(method: string, params: unknown): Promise<Answer>;
      addEventListener(type: string, listener: () => void): void;
      dispatchEvent(event: unknown): boolean;
    };
    const CustomEvent = (globalThis as unknown as { CustomEvent: new (type: string, init: { detail: unknown }) => unknown }).CustomEvent;
    const call = window.__testWalletRequest;
    const provider = {
      async request({ method, params }: { method: string; params?: unknown }) {
        const answer = await call(method, params);
        if ('error' in answer) throw Object.assign(new Error(answer.error.message), { code: answer.error.code });
        return answer.result;
      },
      on() {},
      removeListener() {},
    };
    const announce = () =>
      window.dispatchEvent(
        new CustomEvent('eip6963:announceProvider', {
          detail: Object.freeze({ info: { uuid: '6c1e0b53-1b7d-4c41-9d64-7ad1b0a4d9a1', name: 'Test Wallet', icon: 'data:,', rdns: 'test.wallet' }, provider }),
        }),
      );
    window.addEventListener('eip6963:requestProvider', announce);
    announce();
  });
  return wallet;
}
