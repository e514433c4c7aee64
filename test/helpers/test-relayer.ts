// A relayer for tests on anvil, with the interface the subscription jobs receive
// (SubscriptionRelayer, src/queue/job-context.ts): the operator's key signs charges and cancels of
// the SubscriptionManager on the test chain, for real. It stands in for the service's relayer
// (src/chain, a separate piece of work) until that one is in: simulateCharge classifies a revert
// as the real one must (the contract's own errors by name; a token refusal by reading the
// subscriber's balance and allowance), sends are serialised through one lock (one nonce
// sequence), and every send is recorded for the tests to count.
import {
  BaseError,
  ContractFunctionRevertedError,
  createPublicClient,
  createWalletClient,
  http,
  type Hex,
  type PrivateKeyAccount,
} from 'viem';
import { foundry } from 'viem/chains';
import { ERC20_ABI } from '../../src/chain/abi.js';
import { SUBSCRIPTION_MANAGER_ABI } from '../../src/chain/subscription-manager-abi.js';
import type { ChargeRefusal, ChargeTarget, SubscriptionRelayer } from '../../src/queue/job-context.js';

export interface TestRelayer extends SubscriptionRelayer {
  /** Every transaction sent, in order. */
  sent: { kind: 'charge' | 'cancel'; onchainId: bigint; periodIndex?: number; txHash: Hex }[];
  /** Calls of each method, for counting RPC work. */
  calls: { simulate: number; send: number };
  /** While set, every call throws as an RPC outage would (a service fault, never counted). */
  down: boolean;
}

const NAMED: Record<string, ChargeRefusal> = {
  SubscriptionCanceled: 'subscription_canceled',
  SubscriptionEnded: 'subscription_ended',
  PeriodNotBegun: 'period_not_begun',
  PeriodAlreadyCharged: 'period_already_charged',
};

export function createTestRelayer(rpcUrl: string, chainId: number, operator: PrivateKeyAccount, lock: { tail: Promise<unknown> } = { tail: Promise.resolve() }): TestRelayer {
  const chain = { ...foundry, id: chainId, rpcUrls: { default: { http: [rpcUrl] } } };
  const publicClient = createPublicClient({ chain, transport: http(rpcUrl) });
  const wallet = createWalletClient({ chain, transport: http(rpcUrl), account: operator });
  const sent: TestRelayer['sent'] = [];
  const calls = { simulate: 0, send: 0 };
  const relayer: TestRelayer = {
    sent,
    calls,
    down: false,
    operatorAddress: (id) => (id === chainId ? operator.address : null),

    async simulateCharge(id, t) {
      calls.simulate++;
      if (relayer.down || id !== chainId) throw new Error('RPC unavailable');
      try {
        await publicClient.simulateContract({
          address: t.contract,
          abi: SUBSCRIPTION_MANAGER_ABI,
          functionName: 'charge',
          args: [t.onchainId, t.periodIndex, t.paymentReference],
          account: operator.address,
        });
        return { ok: true };
      } catch (err) {
        const revert = err instanceof BaseError ? err.walk((e) => e instanceof ContractFunctionRevertedError) : null;
        if (!(revert instanceof ContractFunctionRevertedError)) throw err;
        const named = revert.data?.errorName ? NAMED[revert.data.errorName] : undefined;
        if (named) return { ok: false, code: named, message: revert.data!.errorName! };
        // The token refused (SafeERC20FailedOperation, or the token's own error): which one?
        const s = await publicClient.readContract({ address: t.contract, abi: SUBSCRIPTION_MANAGER_ABI, functionName: 'getSubscription', args: [t.onchainId] });
        const [balance, allowance] = await Promise.all([
          publicClient.readContract({ address: s.token, abi: ERC20_ABI, functionName: 'balanceOf', args: [s.subscriber] }),
          publicClient.readContract({ address: s.token, abi: ERC20_ABI, functionName: 'allowance', args: [s.subscriber, t.contract] }),
        ]);
        const amount = BigInt(s.amount);
        if (allowance < amount) return { ok: false, code: 'insufficient_allowance', message: 'allowance short', shortAtomic: amount - allowance };
        if (balance < amount) return { ok: false, code: 'insufficient_balance', message: 'balance short', shortAtomic: amount - balance };
        throw err;
      }
    },

    sendCharge: (id, t: ChargeTarget) =>
      serial(lock, async () => {
        calls.send++;
        if (relayer.down || id !== chainId) throw new Error('RPC unavailable');
        const nonce = await publicClient.getTransactionCount({ address: operator.address, blockTag: 'pending' });
        const txHash = await wallet.writeContract({
          address: t.contract,
          abi: SUBSCRIPTION_MANAGER_ABI,
          functionName: 'charge',
          args: [t.onchainId, t.periodIndex, t.paymentReference],
          nonce,
          gas: 200_000n,
        });
        sent.push({ kind: 'charge', onchainId: t.onchainId, periodIndex: t.periodIndex, txHash });
        return { txHash, nonce };
      }),

    sendCancel: (id, t) =>
      serial(lock, async () => {
        calls.send++;
        if (relayer.down || id !== chainId) throw new Error('RPC unavailable');
        const nonce = await publicClient.getTransactionCount({ address: operator.address, blockTag: 'pending' });
        const txHash = await wallet.writeContract({ address: t.contract, abi: SUBSCRIPTION_MANAGER_ABI, functionName: 'cancel', args: [t.onchainId], nonce, gas: 100_000n });
        sent.push({ kind: 'cancel', onchainId: t.onchainId, txHash });
        return { txHash, nonce };
      }),
  };
  return relayer;
}

/** Runs `fn` after every earlier call on the same lock (one nonce sequence per key). */
function serial<T>(lock: { tail: Promise<unknown> }, fn: () => Promise<T>): Promise<T> {
  const run = lock.tail.then(fn, fn);
  lock.tail = run.catch(() => undefined);
  return run;
}
