// The service's relayer (src/chain/relayer.ts) for the subscription tests, holding a test
// operator key, behind a switch: while `down` is set every call throws RelayerUnavailable, as an
// RPC outage does (the service's fault, never counted against a customer). Every send is noted
// for the tests to count, and the relayer's upkeep (settling mined transactions) runs as the
// worker runtime runs it for its own relayer.
import type { Hex, PrivateKeyAccount } from 'viem';
import { createRelayer, RelayerUnavailable, type Relayer } from '../../src/chain/relayer.js';
import type { Chain } from '../../src/domain/chains.js';
import type { Pool } from '../../src/db/pool.js';
import { createLogger } from '../../src/log.js';
import { Secret } from '../../src/lib/secret.js';
import type { SubscriptionRelayer } from '../../src/queue/job-context.js';

export interface TestRelayer extends SubscriptionRelayer {
  /** Every transaction sent, in order. */
  sent: { kind: 'charge' | 'cancel'; onchainId: bigint; periodIndex?: number; txHash: Hex }[];
  /** Calls of each method, for counting RPC work. */
  calls: { simulate: number; send: number };
  /** While set, every call throws as an RPC outage would. */
  down: boolean;
  stop(): void;
}

export function createTestRelayer(opts: { pool: Pool; chains: readonly Chain[]; chainId: number; operator: PrivateKeyAccount; operatorKey: Hex }): TestRelayer {
  const real: Relayer = createRelayer({
    pool: opts.pool,
    chains: opts.chains,
    keys: [{ chainId: opts.chainId, key: new Secret<Hex>(opts.operatorKey), source: 'test' }],
    stuckBlocks: 5,
    minBalance: '0.01',
    log: createLogger('silent'),
  });
  const upkeep = setInterval(() => {
    real.upkeep().catch(() => undefined);
  }, 500);
  const outage = () => {
    if (relayer.down) throw new RelayerUnavailable('RPC unavailable (the test switched it off)');
  };
  const relayer: TestRelayer = {
    sent: [],
    calls: { simulate: 0, send: 0 },
    down: false,
    operatorAddress: (chainId) => real.operatorAddress(chainId),
    async simulateCharge(chainId, args) {
      relayer.calls.simulate++;
      outage();
      return real.simulateCharge(chainId, args);
    },
    async sendCharge(chainId, args) {
      relayer.calls.send++;
      outage();
      const tx = await real.sendCharge(chainId, args);
      relayer.sent.push({ kind: 'charge', onchainId: args.onchainId, periodIndex: args.periodIndex, txHash: tx.txHash });
      return tx;
    },
    async sendCancel(chainId, args) {
      relayer.calls.send++;
      outage();
      const tx = await real.sendCancel(chainId, args);
      relayer.sent.push({ kind: 'cancel', onchainId: args.onchainId, txHash: tx.txHash });
      return tx;
    },
    stop: () => clearInterval(upkeep),
  };
  return relayer;
}
