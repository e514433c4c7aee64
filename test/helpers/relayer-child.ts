// A process that is only a relayer (src/chain/relayer.ts) sending a batch of charges at once, for a
// test to SIGKILL in the middle of a hold. Reads DATABASE_URL, CHAINS_FILE, RELAYER_KEY and CHARGES
// (JSON: [{ contract, onchainId, periodIndex, paymentReference }], ids as strings); prints one JSON
// line per recorded transaction ({"recorded": txHash, "nonce": n}) and per answer.
import type { Address, Hex } from 'viem';
import { loadChains } from '../../src/chains-config.js';
import { createRelayer } from '../../src/chain/relayer.js';
import { createPool } from '../../src/db/pool.js';
import { Secret } from '../../src/lib/secret.js';
import { createLogger } from '../../src/log.js';

const env = (name: string): string => {
  const v = process.env[name];
  if (!v) throw new Error(`relayer-child: ${name} is not set`);
  return v;
};
const chains = loadChains(env('CHAINS_FILE'), {});
const chainId = Number(env('CHAIN_ID'));
const pool = createPool(env('DATABASE_URL'), 2);
const print = (o: unknown) => process.stdout.write(`${JSON.stringify(o)}\n`);
const relayer = createRelayer({
  pool,
  chains,
  keys: [{ chainId, key: new Secret<Hex>(env('RELAYER_KEY') as Hex), source: 'test' }],
  stuckBlocks: 3,
  minBalance: '0.01',
  log: createLogger('silent'),
  afterRecord: (tx) => {
    print({ recorded: tx.txHash, nonce: tx.nonce });
  },
});
const charges = (JSON.parse(env('CHARGES')) as { contract: Address; onchainId: string; periodIndex: number; paymentReference: Hex }[]).map((c) => ({
  ...c,
  onchainId: BigInt(c.onchainId),
}));
await Promise.allSettled(
  charges.map((c) =>
    relayer.sendCharge(chainId, c).then(
      (sent) => print({ sent: sent.txHash, nonce: sent.nonce }),
      (err: unknown) => print({ failed: String(err) }),
    ),
  ),
);
await pool.end();
