// Attacks on the relayer's batched sends (src/chain/relayer.ts, docs/subscriptions.md "Sending"), on
// anvil and Postgres through the RPC proxy playing a flaky or lying node: a broadcast answered with
// an error though the node pooled it; no answer to a round's batch of broadcasts after the node
// took one of it; a pending nonce count that goes backwards, under two relayers and their upkeeps
// at once; one eth_estimateGas of a round refused by a rate limit and another reverting (the
// subscriber revoked the allowance after the simulation); a relayer process SIGKILLed mid-round,
// its round's broadcasts on their way. Each
// asserts the promises: one nonce sequence without a hole or a reuse, every charge mined once, the
// other sends of a round untouched by one send's failure, the sequence lock let go.
import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createWalletClient, encodeFunctionData, http, keccak256, parseEventLogs, parseTransaction, type Address, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadChains } from '../../src/chains-config.js';
import { createRelayer, RelayerCallRefused, RelayerUnavailable, type Relayer, type RelayerOptions, type SentTransaction } from '../../src/chain/relayer.js';
import { SUBSCRIPTION_MANAGER_ABI } from '../../src/chain/subscription-manager-abi.js';
import { createPool, type Pool } from '../../src/db/pool.js';
import { openRelayerTransactions, relayerTransactionsOf } from '../../src/db/relayer-transactions.js';
import { TEST_USDC_ABI } from '../../src/devchain/contracts.js';
import type { Chain } from '../../src/domain/chains.js';
import { Secret } from '../../src/lib/secret.js';
import { createLogger } from '../../src/log.js';
import { withoutUnsent } from '../helpers/relayer-rows.js';
import { startRpcProxy, startTestChain, type JsonRpcRequest, type RpcProxy, type TestChain } from '../helpers/anvil.js';
import { createTestDatabase, type TestDatabase } from '../helpers/context.js';
import { ROOT, waitUntil } from '../helpers/worker.js';

let chain: TestChain;
let db: TestDatabase;
let chains: Chain[];
let checkPool: Pool;
const pools: Pool[] = [];
const relayerKey = generatePrivateKey();
const operator = privateKeyToAccount(relayerKey).address;
const log = createLogger('silent');
const PERIOD = 60;
const AMOUNT = 10_000_000n; // 10 USDC
let nextPayer = 0;

beforeAll(async () => {
  chain = await startTestChain();
  db = await createTestDatabase();
  chains = loadChains(chain.writeChainsFile(mkdtempSync(path.join(tmpdir(), 'relayer-attacks-'))), {});
  checkPool = createPool(db.url, 2);
  pools.push(checkPool);
  await chain.testClient.setBalance({ address: operator, value: 10n ** 20n });
}, 120_000);

afterAll(async () => {
  await Promise.all(pools.map((p) => p.end()));
  await db?.drop();
  await chain?.stop();
});

function relayer(overrides: Partial<RelayerOptions> = {}): Relayer {
  const pool = createPool(db.url, 4);
  pools.push(pool);
  return createRelayer({
    pool,
    chains,
    keys: [{ chainId: chain.chainId, key: new Secret<Hex>(relayerKey), source: 'test' }],
    stuckBlocks: 3,
    minBalance: '0.01',
    log,
    ...overrides,
  });
}

/** A proxy in front of anvil and the chains the relayer reads through it. */
async function proxied(): Promise<{ proxy: RpcProxy; chains: Chain[] }> {
  const proxy = await startRpcProxy(chain.rpcUrl);
  return { proxy, chains: loadChains(chain.writeChainsFile(mkdtempSync(path.join(tmpdir(), 'relayer-attacks-proxy-')), { rpc_urls: [proxy.url] }), {}) };
}

/** A payer of its own (anvil lets the test send from it, with gas and 100 USDC) subscribes; returns the subscription's id and payer. */
async function subscribe(): Promise<{ id: bigint; payer: Address }> {
  const payer = privateKeyToAccount(generatePrivateKey()).address;
  await chain.testClient.impersonateAccount({ address: payer });
  await chain.testClient.setBalance({ address: payer, value: 10n ** 18n });
  await chain.transfer({ from: chain.payers[nextPayer++ % chain.payers.length].address, to: payer, amountAtomic: AMOUNT * 10n });
  await approve(payer, AMOUNT * 100n);
  const wallet = createWalletClient({ transport: http(chain.rpcUrl) });
  const hash = await wallet.writeContract({
    account: payer,
    chain: null,
    address: chain.subscriptionManager,
    abi: SUBSCRIPTION_MANAGER_ABI,
    functionName: 'subscribe',
    args: [
      {
        payee: '0x00000000000000000000000000000000000000aa',
        token: chain.token,
        amount: AMOUNT,
        period: PERIOD,
        feeBps: 100,
        feeAddress: chain.feeAddress,
        operator,
        endsAt: 0,
        checkoutReference: `0x${'22'.repeat(32)}`,
      },
    ],
  });
  const receipt = await chain.publicClient.waitForTransactionReceipt({ hash });
  expect(receipt.status).toBe('success');
  const [ev] = parseEventLogs({ abi: SUBSCRIPTION_MANAGER_ABI, eventName: 'Subscribed', logs: receipt.logs });
  return { id: ev.args.id, payer };
}

async function approve(payer: Address, amount: bigint): Promise<void> {
  const wallet = createWalletClient({ transport: http(chain.rpcUrl) });
  const hash = await wallet.writeContract({ account: payer, chain: null, address: chain.token, abi: TEST_USDC_ABI, functionName: 'approve', args: [chain.subscriptionManager, amount] });
  expect((await chain.publicClient.waitForTransactionReceipt({ hash })).status).toBe('success');
}

async function subscribeMany(n: number): Promise<{ id: bigint; payer: Address }[]> {
  // At most as many at once as there are funding payers: two transfers from one payer at once may
  // be given one nonce by the node ("replacement transaction underpriced").
  const subs: { id: bigint; payer: Address }[] = [];
  while (subs.length < n) subs.push(...(await Promise.all(Array.from({ length: Math.min(n - subs.length, chain.payers.length) }, () => subscribe()))));
  await chain.testClient.increaseTime({ seconds: PERIOD + 1 });
  await chain.mine(1);
  return subs;
}

const charge = (id: bigint, periodIndex = 1) => ({
  contract: chain.subscriptionManager,
  onchainId: id,
  periodIndex,
  paymentReference: `0x${id.toString(16).padStart(14, '0')}${periodIndex.toString(16).padStart(2, '0')}` as Hex,
});
const subjectOf = (id: bigint, periodIndex = 1) => `charge:${chain.subscriptionManager.toLowerCase()}:${id}:${periodIndex}`;

async function chargedLogs(id: bigint): Promise<number> {
  const logs = await chain.publicClient.getContractEvents({ address: chain.subscriptionManager, abi: SUBSCRIPTION_MANAGER_ABI, eventName: 'Charged', args: { id }, fromBlock: 0n });
  return logs.length;
}

/** The records, less those a round closed without broadcasting them (test/helpers/relayer-rows.ts). */
const rows = async () => withoutUnsent(await relayerTransactionsOf(checkPool, chain.chainId));
const usedNonces = () => chain.publicClient.getTransactionCount({ address: operator, blockTag: 'latest' });
const range = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + i);
const isBroadcast = (req: JsonRpcRequest) => req.method === 'eth_sendRawTransaction';
const hashOf = (req: JsonRpcRequest) => keccak256((req.params ?? [])[0] as Hex);

/** A process that is only a relayer (test/helpers/relayer-child.ts) sending `charges` at once; its output lines kept. */
function spawnRelayer(chainsFile: string, charges: ReturnType<typeof charge>[]) {
  const child = spawn(process.execPath, ['--import', 'tsx', 'test/helpers/relayer-child.ts'], {
    cwd: ROOT,
    env: {
      ...process.env,
      DATABASE_URL: db.url,
      CHAINS_FILE: chainsFile,
      CHAIN_ID: String(chain.chainId),
      RELAYER_KEY: relayerKey,
      CHARGES: JSON.stringify(charges.map((c) => ({ ...c, onchainId: c.onchainId.toString() }))),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output: string[] = [];
  child.stdout.on('data', (c: Buffer) => output.push(c.toString('utf8')));
  child.stderr.on('data', (c: Buffer) => output.push(c.toString('utf8')));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return Object.assign(child, { output, exited });
}

/** Every subscription charged once, by a mined transaction the records hold as mined: upkeep settles first. */
async function expectEachChargedOnce(r: Relayer, subs: { id: bigint }[]): Promise<void> {
  for (const { id } of subs) expect(await chargedLogs(id)).toBe(1);
  await r.upkeep();
  const all = await rows();
  for (const { id } of subs) {
    const mine = all.filter((x) => x.subject === subjectOf(id));
    // One transaction of the period mined, and the records say so (none of it `failed` while it landed).
    expect(mine.map((x) => x.status)).toEqual(['mined']);
  }
}

describe('a flaky or lying node under a batch', () => {
  // Mining at once, the next send of the round signed on the same nonce met "nonce too low" and was
  // told sent (a transaction that can never be mined); a node that pools (as geth between blocks)
  // answers it "replacement transaction underpriced", and every later send of the round the same.
  // "already known" and "nonce too low" are answers a node gives for a transaction it took (a
  // second node behind the URL, or the first one's retry): both are taken as sent.
  it.each([
    { mining: 'at once' as const, answer: 'internal error' },
    { mining: 'between blocks' as const, answer: 'internal error' },
    { mining: 'between blocks' as const, answer: 'already known' },
    { mining: 'at once' as const, answer: 'nonce too low: next nonce 1, tx nonce 0' },
  ])('a broadcast answered $answer though the node pooled it (mining $mining): the send is the one sent, the rest of the round take the next nonces, one charge each', async ({ mining, answer }) => {
    const { proxy, chains: viaProxy } = await proxied();
    try {
      const r = relayer({ chains: viaProxy });
      const subs = await subscribeMany(4);
      const before = await usedNonces();
      let lied: Hex | null = null;
      proxy.rewrite(async (req, real) => {
        if (!isBroadcast(req) || lied !== null) return undefined;
        lied = hashOf(req);
        await real();
        // The node took it (it is in its pool, here mined at once) and yet answered with an error.
        return { jsonrpc: '2.0', id: req.id ?? null, error: { code: answer === 'internal error' ? -32603 : -32000, message: answer } };
      });
      if (mining === 'between blocks') await chain.testClient.setAutomine(false);
      let answers: PromiseSettledResult<SentTransaction>[];
      try {
        answers = await Promise.allSettled(subs.map(({ id }) => r.sendCharge(chain.chainId, charge(id))));
      } finally {
        await chain.testClient.setAutomine(true);
      }
      await chain.mine(1);
      proxy.rewrite(null);
      expect(lied).not.toBeNull();
      expect(answers.map((a) => a.status)).toEqual(['fulfilled', 'fulfilled', 'fulfilled', 'fulfilled']);
      const sent = answers.map((a) => (a as PromiseFulfilledResult<SentTransaction>).value);
      expect(sent[0].txHash).toBe(lied);
      expect(sent.map((x) => x.nonce)).toEqual(range(before, 4));
      for (const x of sent) expect((await chain.publicClient.waitForTransactionReceipt({ hash: x.txHash })).status).toBe('success');
      expect(await usedNonces()).toBe(before + 4);
      await expectEachChargedOnce(r, subs);
    } finally {
      proxy.rewrite(null);
      await proxy.close();
    }
  });

  // The nonce taken, between the round's read and the broadcast, by a transaction of the key the
  // records do not hold (the key used elsewhere, or a node behind the URL that had pooled one the
  // records say was refused): "nonce too low" for a transaction the node does not have was taken
  // for sent, the caller told a hash that can never be mined (until settled dropped blocks later).
  it('a broadcast answered "nonce too low" for a transaction the node does not have: not sent; the service\'s fault, asked again a new one, the rest of the round after the nonce used', async () => {
    const { proxy, chains: viaProxy } = await proxied();
    try {
      const r = relayer({ chains: viaProxy });
      const subs = await subscribeMany(3);
      const before = await usedNonces();
      let outrun: Hex | null = null;
      proxy.rewrite(async (req) => {
        if (!isBroadcast(req) || outrun !== null) return undefined;
        outrun = hashOf(req);
        // Another sender of the key takes this very nonce first, and it is mined.
        const wallet = createWalletClient({ account: privateKeyToAccount(relayerKey), transport: http(chain.rpcUrl) });
        const hash = await wallet.sendTransaction({ chain: null, to: chain.feeAddress, value: 1n, nonce: before });
        await chain.publicClient.waitForTransactionReceipt({ hash });
        return undefined;
      });
      const answers = await Promise.allSettled(subs.map(({ id }) => r.sendCharge(chain.chainId, charge(id))));
      proxy.rewrite(null);
      expect(outrun).not.toBeNull();
      expect(answers[0]).toMatchObject({ status: 'rejected', reason: expect.any(RelayerUnavailable) });
      expect((await rows()).find((x) => x.tx_hash === outrun)).toMatchObject({ nonce: String(before), status: 'dropped' });
      const again = await r.sendCharge(chain.chainId, charge(subs[0].id));
      const sent = [again, ...answers.slice(1).map((a) => (a as PromiseFulfilledResult<SentTransaction>).value)];
      expect(sent.map((x) => x.nonce).sort((a, b) => a - b)).toEqual(range(before + 1, 3));
      for (const x of sent) expect((await chain.publicClient.waitForTransactionReceipt({ hash: x.txHash })).status).toBe('success');
      expect(await usedNonces()).toBe(before + 4);
      for (const { id } of subs) expect(await chargedLogs(id)).toBe(1);
    } finally {
      proxy.rewrite(null);
      await proxy.close();
    }
  });

  // A round's broadcasts go as one JSON-RPC batch: no answer to it leaves the relayer not knowing
  // which of them the node took. It asks the node about each; the ones it has are sent; no other
  // is closed (an unanswered one may still be on its way), so each stays recorded, the next settle
  // broadcasts it again, and the round stops there.
  it('no answer to a round\'s batch after the node took its second: that one is sent, the others stay recorded (none closed) and fail as the service\'s fault, no hole, the lock is let go, asked again each is the same transaction', async () => {
    const { proxy, chains: viaProxy } = await proxied();
    try {
      const r = relayer({ chains: viaProxy });
      const subs = await subscribeMany(5);
      const before = await usedNonces();
      let broadcasts = 0;
      let lost: Hex | null = null;
      proxy.rewrite(async (req, real) => {
        if (!isBroadcast(req) || ++broadcasts !== 2) return undefined;
        lost = hashOf(req);
        await real();
        // The proxy answers 502 (a load balancer losing the node's answer): no answer, for viem,
        // to the whole batch; of it, only this one reached the node.
        throw new Error('upstream connection reset');
      });
      const answers = await Promise.allSettled(subs.map(({ id }) => r.sendCharge(chain.chainId, charge(id))));
      proxy.rewrite(null);
      expect(lost).not.toBeNull();
      expect(answers[1]).toMatchObject({ status: 'fulfilled', value: { txHash: lost, nonce: before + 1 } });
      for (const i of [0, 2, 3, 4]) expect(answers[i]).toMatchObject({ status: 'rejected', reason: expect.any(RelayerUnavailable) });
      // Their records stay: each the transaction of its period, and the nonces have no hole.
      const mine = (await rows()).filter((x) => Number(x.nonce) >= before);
      expect(mine.map((x) => [Number(x.nonce), x.subject])).toEqual(subs.map(({ id }, i) => [before + i, subjectOf(id)]));
      for (const i of [0, 2, 3, 4]) {
        // Still open, or already settled after the next hold's settle broadcast it (anvil mines at once): never given up.
        expect(['pending', 'mined']).toContain(mine[i].status);
        // The job retries the charge: the same transaction, not a second one.
        expect(await r.sendCharge(chain.chainId, charge(subs[i].id))).toEqual({ txHash: mine[i].tx_hash, nonce: before + i });
      }
      // The lock was let go: another relayer's upkeep (the same lock) gets through.
      await relayer().upkeep();
      for (const x of mine) expect((await chain.publicClient.waitForTransactionReceipt({ hash: x.tx_hash as Hex })).status).toBe('success');
      expect(await usedNonces()).toBe(before + 5);
      await expectEachChargedOnce(r, subs);
    } finally {
      proxy.rewrite(null);
      await proxy.close();
    }
  });

  // The node refuses the first of a round's batch and takes the two after it (a node may refuse
  // one for its own reasons: its pool full for a moment, a price rule). Closed as refused, its
  // nonce would be a hole the two taken wait behind, and the next round would sign after them.
  it('the first of a round\'s batch refused while the node took the two after it: kept, not closed (its nonce carries them), the service\'s fault; the next settle broadcasts it, no hole, one charge each', async () => {
    const { proxy, chains: viaProxy } = await proxied();
    try {
      const r = relayer({ chains: viaProxy });
      const subs = await subscribeMany(3);
      const before = await usedNonces();
      let refused: Hex | null = null;
      proxy.rewrite(async (req) => {
        if (!isBroadcast(req) || refused !== null) return undefined;
        refused = hashOf(req);
        return { jsonrpc: '2.0', id: req.id ?? null, error: { code: -32000, message: 'txpool is full' } };
      });
      const answers = await Promise.allSettled(subs.map(({ id }) => r.sendCharge(chain.chainId, charge(id))));
      proxy.rewrite(null);
      expect(refused).not.toBeNull();
      expect(answers[0]).toMatchObject({ status: 'rejected', reason: expect.any(RelayerUnavailable) });
      expect(answers.slice(1).map((a) => a.status)).toEqual(['fulfilled', 'fulfilled']);
      const mine = (await rows()).filter((x) => Number(x.nonce) >= before);
      expect(mine.map((x) => Number(x.nonce))).toEqual(range(before, 3));
      expect(mine[0]).toMatchObject({ tx_hash: refused, status: 'pending', broadcasts: 0 });
      // Behind the hole, the two taken wait.
      expect(await usedNonces()).toBe(before);
      // The next hold's settle (here the upkeep) broadcasts it: the three are mined.
      await r.upkeep();
      for (const x of mine) expect((await chain.publicClient.waitForTransactionReceipt({ hash: x.tx_hash as Hex })).status).toBe('success');
      expect(await usedNonces()).toBe(before + 3);
      // Asked again (the job retries), it is that same transaction.
      expect(await r.sendCharge(chain.chainId, charge(subs[0].id))).toEqual({ txHash: refused, nonce: before });
      await expectEachChargedOnce(r, subs);
    } finally {
      proxy.rewrite(null);
      await proxy.close();
    }
  });

  // The hole kept open above, for good: a node that refuses one call whatever its fees (its own
  // policy) while it takes the later nonces. Rebroadcast and replaced at every settle, it held
  // every later transaction of the key back forever.
  it('a call the node refuses for good, at any fees, while it took the two after it: RELAYER_STUCK_BLOCKS later its nonce is used by a no-op to the relayer itself, the two are mined, the call is dropped and, asked again, signed at a new nonce; one charge each', async () => {
    const { proxy, chains: viaProxy } = await proxied();
    try {
      const r = relayer({ chains: viaProxy });
      const subs = await subscribeMany(3);
      const before = await usedNonces();
      const refused: Hex[] = [];
      proxy.rewrite(async (req) => {
        if (!isBroadcast(req)) return undefined;
        const tx = parseTransaction((req.params ?? [])[0] as Hex);
        if (tx.nonce !== before || tx.to?.toLowerCase() !== chain.subscriptionManager.toLowerCase()) return undefined;
        refused.push(hashOf(req));
        return { jsonrpc: '2.0', id: req.id ?? null, error: { code: -32000, message: 'transaction rejected by the pool\'s policy' } };
      });
      const answers = await Promise.allSettled(subs.map(({ id }) => r.sendCharge(chain.chainId, charge(id))));
      expect(answers[0]).toMatchObject({ status: 'rejected', reason: expect.any(RelayerUnavailable) });
      expect(answers.slice(1).map((a) => a.status)).toEqual(['fulfilled', 'fulfilled']);
      const call = (await rows()).find((x) => Number(x.nonce) === before)!;
      expect(call).toMatchObject({ subject: subjectOf(subs[0].id), status: 'pending' });
      // Not stuck yet: broadcast again and replaced at higher fees, both refused; nothing fills the nonce.
      await r.upkeep();
      expect(refused.length).toBeGreaterThanOrEqual(3);
      expect((await rows()).filter((x) => x.purpose === 'filler')).toEqual([]);
      expect(await usedNonces()).toBe(before);
      await chain.mine(3);
      await r.upkeep();
      const filler = (await rows()).find((x) => x.purpose === 'filler');
      expect(filler).toMatchObject({ nonce: String(before), replaces_id: call.id, contract_address: operator.toLowerCase() });
      const receipt = await chain.publicClient.waitForTransactionReceipt({ hash: filler!.tx_hash as Hex });
      expect(receipt).toMatchObject({ status: 'success', from: operator.toLowerCase(), to: operator.toLowerCase(), gasUsed: 21_000n });
      expect((await chain.publicClient.getTransaction({ hash: filler!.tx_hash as Hex })).value).toBe(0n);
      for (const a of answers.slice(1)) {
        expect((await chain.publicClient.waitForTransactionReceipt({ hash: (a as PromiseFulfilledResult<SentTransaction>).value.txHash })).status).toBe('success');
      }
      expect(await usedNonces()).toBe(before + 3);
      await r.upkeep();
      const settled = await rows();
      expect(settled.find((x) => x.id === filler!.id)!.status).toBe('mined');
      expect(settled.find((x) => x.id === call.id)!.status).toBe('dropped');
      expect(await chargedLogs(subs[0].id)).toBe(0);
      // Its job asks again: no live transaction for the period, so a new one, at the next nonce.
      const again = await r.sendCharge(chain.chainId, charge(subs[0].id));
      expect(again.nonce).toBe(before + 3);
      expect((await chain.publicClient.waitForTransactionReceipt({ hash: again.txHash })).status).toBe('success');
      for (const { id } of subs) expect(await chargedLogs(id)).toBe(1);
      await r.upkeep();
      const last = await rows();
      for (const { id } of subs) expect(last.filter((x) => x.subject === subjectOf(id) && x.status === 'mined')).toHaveLength(1);
      expect(await usedNonces()).toBe(before + 4);
    } finally {
      proxy.rewrite(null);
      await proxy.close();
    }
  });

  // Found by review: the node took the whole batch, the answer to it was lost, and the node did
  // not answer the lookups either. The rows after the first were closed "never broadcast" though
  // the node had them (and mined them): records saying failed for mined charges, and their nonces
  // free to be given to other transactions.
  it('a batch unanswered and the lookups unanswered too: no row closed (each may be on the node), each caller told the service\'s fault; the next settle finds them mined; once each', async () => {
    const { proxy, chains: viaProxy } = await proxied();
    try {
      const r = relayer({ chains: viaProxy });
      const subs = await subscribeMany(3);
      const before = await usedNonces();
      let lookupsFailed = 0;
      proxy.rewrite(async (req, real) => {
        if (isBroadcast(req)) {
          await real(); // the node takes each one...
          throw new Error('upstream timeout'); // ...and the answer to the batch is lost
        }
        if (req.method === 'eth_getTransactionByHash' && lookupsFailed < 3) {
          lookupsFailed++;
          throw new Error('upstream timeout');
        }
        return undefined;
      });
      const answers = await Promise.allSettled(subs.map(({ id }) => r.sendCharge(chain.chainId, charge(id))));
      proxy.rewrite(null);
      for (const a of answers) expect(a).toMatchObject({ status: 'rejected', reason: expect.any(RelayerUnavailable) });
      const mine = (await relayerTransactionsOf(checkPool, chain.chainId)).filter((x) => Number(x.nonce) >= before);
      expect(mine.map((x) => [Number(x.nonce), x.status])).toEqual(range(before, 3).map((n) => [n, expect.stringMatching(/^(pending|mined)$/)]));
      for (const x of mine) expect((await chain.publicClient.waitForTransactionReceipt({ hash: x.tx_hash as Hex })).status).toBe('success');
      await r.upkeep();
      expect((await rows()).filter((x) => Number(x.nonce) >= before).map((x) => x.status)).toEqual(['mined', 'mined', 'mined']);
      // Asked again (the job retries), each is its mined transaction.
      for (const [i, { id }] of subs.entries()) expect(await r.sendCharge(chain.chainId, charge(id))).toEqual({ txHash: mine[i].tx_hash, nonce: before + i });
      expect(await usedNonces()).toBe(before + 3);
      await expectEachChargedOnce(r, subs);
    } finally {
      proxy.rewrite(null);
      await proxy.close();
    }
  });

  // Found by review: a gas estimate under the intrinsic cost (a lying node's) was signed; the node
  // refused it for good while it took the next of the batch, a nonce no rebroadcast fills.
  it('a gas estimate under the intrinsic cost: refused before it is signed (the service\'s fault), the others consecutive and mined', async () => {
    const r = relayer();
    const subs = await subscribeMany(3);
    const before = await usedNonces();
    const answers = await Promise.allSettled([
      r.sendCharge(chain.chainId, charge(subs[0].id)),
      r.sendCharge(chain.chainId, { ...charge(subs[1].id), gas: 1000n }),
      r.sendCharge(chain.chainId, charge(subs[2].id)),
    ]);
    expect(answers[1]).toMatchObject({ status: 'rejected', reason: expect.any(RelayerUnavailable) });
    expect((await rows()).filter((x) => x.subject === subjectOf(subs[1].id))).toEqual([]);
    const sent = [answers[0], answers[2]].map((a) => (a as PromiseFulfilledResult<SentTransaction>).value);
    expect(sent.map((x) => x.nonce)).toEqual(range(before, 2));
    for (const x of sent) expect((await chain.publicClient.waitForTransactionReceipt({ hash: x.txHash })).status).toBe('success');
    // Asked again with the simulation's true gas, it takes the next nonce.
    const again = await r.sendCharge(chain.chainId, charge(subs[1].id));
    expect(again.nonce).toBe(before + 2);
    expect((await chain.publicClient.waitForTransactionReceipt({ hash: again.txHash })).status).toBe('success');
    await expectEachChargedOnce(r, subs);
  });

  it('a pending nonce count that goes backwards, under two relayers sending in waves with their upkeeps at once: no nonce used twice or skipped', async () => {
    const { proxy, chains: viaProxy } = await proxied();
    try {
      let lies = 0;
      // The lying node's pending count: 0 at first, then always lower than the truth.
      proxy.rewrite(async (req, real) => {
        if (req.method !== 'eth_getTransactionCount' || (req.params ?? [])[1] !== 'pending') return undefined;
        const truth = BigInt((await real()).result as string);
        lies += 1;
        const told = lies === 1 ? 0n : truth > 3n ? truth - 3n : 0n;
        return { jsonrpc: '2.0', id: req.id ?? null, result: `0x${told.toString(16)}` };
      });
      const liar = relayer({ chains: viaProxy });
      const honest = relayer();
      const subs = await subscribeMany(12);
      const before = await usedNonces();
      const sent: SentTransaction[] = [];
      for (let wave = 0; wave < 3; wave++) {
        const four = subs.slice(wave * 4, wave * 4 + 4);
        const got = await Promise.all([
          ...four.map(({ id }, i) => (i % 2 === 0 ? liar : honest).sendCharge(chain.chainId, charge(id))),
          liar.upkeep().then(() => null),
          honest.upkeep().then(() => null),
        ]);
        sent.push(...got.filter((x): x is SentTransaction => x !== null));
      }
      expect(lies).toBeGreaterThan(0);
      expect(sent.map((x) => x.nonce).sort((a, b) => a - b)).toEqual(range(before, 12));
      for (const x of sent) expect((await chain.publicClient.waitForTransactionReceipt({ hash: x.txHash })).status).toBe('success');
      expect(await usedNonces()).toBe(before + 12);
      await expectEachChargedOnce(honest, subs);
    } finally {
      proxy.rewrite(null);
      await proxy.close();
    }
  });
});

describe('a pending nonce count that lies upward', () => {
  // Trusted as it was, one answer 2 above the truth had the round sign past two nonces nobody
  // would ever use: every later transaction of the key waited behind the hole, replaced again and
  // again with fees 25% higher each time, never mined.
  it('counted beyond the records and the mined count: nothing signed over the hole the node claims; once it answers the truth, the sends go out without a hole', async () => {
    const { proxy, chains: viaProxy } = await proxied();
    try {
      let lying = true;
      proxy.rewrite(async (req, real) => {
        if (!lying || req.method !== 'eth_getTransactionCount' || (req.params ?? [])[1] !== 'pending') return undefined;
        const truth = BigInt((await real()).result as string);
        return { jsonrpc: '2.0', id: req.id ?? null, result: `0x${(truth + 2n).toString(16)}` };
      });
      const r = relayer({ chains: viaProxy });
      const subs = await subscribeMany(4);
      const before = await usedNonces();
      const first = await Promise.allSettled(subs.slice(0, 2).map(({ id }) => r.sendCharge(chain.chainId, charge(id))));
      lying = false;
      // The service's fault (retried, never counted against the customer), and nothing recorded.
      for (const answer of first) expect(answer).toMatchObject({ status: 'rejected', reason: expect.any(RelayerUnavailable) });
      expect((await rows()).filter((x) => Number(x.nonce) >= before)).toEqual([]);
      const sent = await Promise.all(subs.map(({ id }) => r.sendCharge(chain.chainId, charge(id))));
      expect(sent.map((x) => x.nonce)).toEqual(range(before, 4));
      for (const x of sent) expect((await chain.publicClient.waitForTransactionReceipt({ hash: x.txHash })).status).toBe('success');
      expect(await usedNonces()).toBe(before + 4);
      await expectEachChargedOnce(r, subs);
    } finally {
      proxy.rewrite(null);
      await proxy.close();
    }
  });

  it('counted beyond the records by transactions of the key the node has mined (the key used elsewhere): the next nonces after them', async () => {
    const r = relayer();
    const subs = await subscribeMany(2);
    // The operator's key used outside the service: two transactions the records do not hold, mined.
    const wallet = createWalletClient({ account: privateKeyToAccount(relayerKey), transport: http(chain.rpcUrl) });
    for (let i = 0; i < 2; i++) {
      const hash = await wallet.sendTransaction({ chain: null, to: chain.feeAddress, value: 1n });
      await chain.publicClient.waitForTransactionReceipt({ hash });
    }
    const before = await usedNonces();
    const sent = await Promise.all(subs.map(({ id }) => r.sendCharge(chain.chainId, charge(id))));
    expect(sent.map((x) => x.nonce)).toEqual(range(before, 2));
    for (const x of sent) expect((await chain.publicClient.waitForTransactionReceipt({ hash: x.txHash })).status).toBe('success');
    await expectEachChargedOnce(r, subs);
  });
});

describe('one send\'s failure in a round', () => {
  // The round's estimates go as one JSON-RPC batch; a node answers for each call of it (here a
  // rate limit for one, as providers count each call of a batch).
  it('one estimate refused by the rate limit and one reverting (the subscriber revoked the allowance after the simulation): each fails alone, nothing recorded or signed for them, the others consecutive; the revoked one is the customer\'s shortfall at the next simulation', async () => {
    const { proxy, chains: viaProxy } = await proxied();
    try {
      const r = relayer({ chains: viaProxy });
      const subs = await subscribeMany(5);
      for (const { id } of subs) expect(await r.simulateCharge(chain.chainId, charge(id))).toMatchObject({ ok: true, gas: expect.any(BigInt) });
      await approve(subs[3].payer, 0n);
      const unanswered = charge(subs[1].id);
      const calldataOf1 = encodeFunctionData({ abi: SUBSCRIPTION_MANAGER_ABI, functionName: 'charge', args: [unanswered.onchainId, unanswered.periodIndex, unanswered.paymentReference] });
      proxy.rewrite((req) => {
        const call = ((req.params ?? [])[0] ?? {}) as { data?: string; input?: string };
        if (req.method === 'eth_estimateGas' && (call.data ?? call.input) === calldataOf1) return { jsonrpc: '2.0', id: req.id ?? null, error: { code: -32005, message: 'limit exceeded' } };
        return undefined;
      });
      const before = await usedNonces();
      const answers = await Promise.allSettled(subs.map(({ id }) => r.sendCharge(chain.chainId, charge(id))));
      proxy.rewrite(null);
      expect(answers[1]).toMatchObject({ status: 'rejected', reason: expect.any(RelayerUnavailable) });
      expect(answers[3]).toMatchObject({ status: 'rejected', reason: expect.any(RelayerCallRefused) });
      const sent = [0, 2, 4].map((i) => (answers[i] as PromiseFulfilledResult<SentTransaction>).value);
      expect(sent.map((x) => x.nonce)).toEqual(range(before, 3));
      const all = await rows();
      expect(all.filter((x) => x.subject === subjectOf(subs[1].id) || x.subject === subjectOf(subs[3].id))).toEqual([]);
      for (const x of sent) expect((await chain.publicClient.waitForTransactionReceipt({ hash: x.txHash })).status).toBe('success');
      expect(await usedNonces()).toBe(before + 3);
      // The revoked allowance is the customer's, said in their terms (the job counts it at its retry, not at the refused send).
      expect(await r.simulateCharge(chain.chainId, charge(subs[3].id))).toMatchObject({ ok: false, code: 'insufficient_allowance' });
      // The unanswered one, asked again, takes the next nonce.
      const again = await r.sendCharge(chain.chainId, unanswered);
      expect(again.nonce).toBe(before + 3);
      expect((await chain.publicClient.waitForTransactionReceipt({ hash: again.txHash })).status).toBe('success');
      await expectEachChargedOnce(r, [subs[0], subs[1], subs[2], subs[4]]);
      expect(await chargedLogs(subs[3].id)).toBe(0);
    } finally {
      proxy.rewrite(null);
      await proxy.close();
    }
  });
});

describe('a round stopped early, its unsent sends signed again at once', () => {
  // The sends after the stop were recorded, closed `failed` (never broadcast) and queued again.
  // Signed again with the same nonce, call, gas and fees (no block between: the same fee
  // estimate) they are the very transactions closed, hash and all: the record of the new one
  // collided with the closed one's (tx_hash is unique), and the whole next round was refused
  // with a database error instead of being sent.
  it('a crash at the round\'s first record, no block mined before the next hold: the others are sent at the next nonces, once each', async () => {
    const subs = await subscribeMany(3);
    const before = await usedNonces();
    let records = 0;
    const r = relayer({
      afterRecord: () => {
        if (++records === 1) throw new Error('the test: a crash after the record');
      },
    });
    let answers: PromiseSettledResult<SentTransaction>[];
    await chain.testClient.setAutomine(false);
    try {
      answers = await Promise.allSettled(subs.map(({ id }) => r.sendCharge(chain.chainId, charge(id))));
    } finally {
      await chain.testClient.setAutomine(true);
    }
    await chain.mine(1);
    expect(answers[0]).toMatchObject({ status: 'rejected' });
    expect(answers.slice(1).map((a) => (a.status === 'rejected' ? String(a.reason) : a.status))).toEqual(['fulfilled', 'fulfilled']);
    const sent = answers.slice(1).map((a) => (a as PromiseFulfilledResult<SentTransaction>).value);
    expect(sent.map((x) => x.nonce)).toEqual(range(before + 1, 2));
    for (const x of sent) expect((await chain.publicClient.waitForTransactionReceipt({ hash: x.txHash })).status).toBe('success');
    // The first, recorded and never broadcast by its round, went out with the next hold's settle.
    expect(await usedNonces()).toBe(before + 3);
    await expectEachChargedOnce(r, subs);
  });
});

describe('the sequence lock lost mid-round', () => {
  // The lock is the session's: a session the database ends (pg_terminate_backend, an idle timeout,
  // a failover) lets another process in while the hold still runs. Every record goes through the
  // lock's own session, so the hold can record nothing more once it has lost the lock.
  it('the lock\'s session ended after a record, another relayer sending at once: no nonce used twice or skipped, every charge mined once', async () => {
    const subs = await subscribeMany(8);
    const before = await usedNonces();
    const other = relayer();
    let records = 0;
    let others: Promise<PromiseSettledResult<SentTransaction>[]> | null = null;
    const victim = relayer({
      afterRecord: async () => {
        if (++records !== 2) return;
        const { rows: holders } = await checkPool.query<{ pid: number }>(`select pid from pg_locks where locktype = 'advisory' and granted and database = (select oid from pg_database where datname = current_database())`);
        expect(holders).toHaveLength(1);
        await checkPool.query('select pg_terminate_backend($1)', [holders[0].pid]);
        await waitUntil(async () => (await checkPool.query('select 1 from pg_stat_activity where pid = $1', [holders[0].pid])).rowCount === 0);
        // The lock is free: the other relayer's batch goes now, while this hold believes it holds it.
        others = Promise.allSettled(subs.slice(4).map(({ id }) => other.sendCharge(chain.chainId, charge(id))));
        await waitUntil(async () => (await rows()).filter((x) => Number(x.nonce) >= before).length > 2);
      },
    });
    const mine = await Promise.allSettled(subs.slice(0, 4).map(({ id }) => victim.sendCharge(chain.chainId, charge(id))));
    expect(others).not.toBeNull();
    const theirs = await others!;
    expect(theirs.map((a) => a.status)).toEqual(['fulfilled', 'fulfilled', 'fulfilled', 'fulfilled']);
    // A send that met the lost session is the service's fault; asked again (the job retries), its
    // recorded transaction or a new one, never a second of its period.
    for (const [i, a] of mine.entries()) if (a.status === 'rejected') await victim.sendCharge(chain.chainId, charge(subs[i].id));
    await victim.upkeep();
    const recorded = (await rows()).filter((x) => Number(x.nonce) >= before && x.status !== 'failed');
    expect(recorded.map((x) => Number(x.nonce)).sort((a, b) => a - b)).toEqual(range(before, 8));
    for (const x of recorded) expect((await chain.publicClient.waitForTransactionReceipt({ hash: x.tx_hash as Hex })).status).toBe('success');
    expect(await usedNonces()).toBe(before + 8);
    await expectEachChargedOnce(victim, subs);
  });
});

describe('two relayer processes', () => {
  it('two processes sending a batch each at once on one key: distinct consecutive nonces, every charge mined once', async () => {
    const subs = await subscribeMany(12);
    const before = await usedNonces();
    const file = chain.writeChainsFile(mkdtempSync(path.join(tmpdir(), 'relayer-attacks-two-')));
    const both = [spawnRelayer(file, subs.slice(0, 6).map(({ id }) => charge(id))), spawnRelayer(file, subs.slice(6).map(({ id }) => charge(id)))];
    try {
      for (const p of both) expect(await p.exited, p.output.join('')).toBe(0);
      const answers = both.flatMap((p) => p.output.join('').split('\n').filter((l) => l.startsWith('{"sent"') || l.startsWith('{"failed"')));
      expect(answers.filter((l) => l.startsWith('{"sent"'))).toHaveLength(12);
      const recorded = (await rows()).filter((x) => Number(x.nonce) >= before);
      expect(recorded.map((x) => Number(x.nonce))).toEqual(range(before, 12));
      for (const x of recorded) expect((await chain.publicClient.waitForTransactionReceipt({ hash: x.tx_hash as Hex })).status).toBe('success');
      expect(await usedNonces()).toBe(before + 12);
      await expectEachChargedOnce(relayer(), subs);
    } finally {
      for (const p of both) if (p.exitCode === null && p.signalCode === null) p.kill('SIGKILL');
    }
  }, 120_000);
});

describe('a relayer process SIGKILLed mid-round', () => {
  it('killed with its round on its way to the node, the third held: the next relayer broadcasts those very transactions, no hole, one charge each', async () => {
    const { proxy, chains: viaProxy } = await proxied();
    const subs = await subscribeMany(6);
    const before = await usedNonces();
    let broadcasts = 0;
    let held: Hex | null = null;
    let release = (): void => undefined;
    const heldOpen = new Promise<void>((resolve) => {
      release = resolve;
    });
    proxy.rewrite(async (req) => {
      if (!isBroadcast(req) || ++broadcasts !== 3) return undefined;
      // The third broadcast never reaches the node: the process dies while it is on its way.
      held = hashOf(req);
      await heldOpen;
      return { jsonrpc: '2.0', id: req.id ?? null, error: { code: -32000, message: 'the test held it' } };
    });
    const child = spawnRelayer(chain.writeChainsFile(mkdtempSync(path.join(tmpdir(), 'relayer-attacks-child-')), { rpc_urls: [proxy.url] }), subs.map(({ id }) => charge(id)));
    const { output, exited } = child;
    try {
      await waitUntil(async () => held !== null || child.exitCode !== null, 60_000).catch(() => undefined);
      expect(held, output.join('')).not.toBeNull();
      child.kill('SIGKILL');
      await exited;
      release();
      proxy.rewrite(null);
      // The round's six recorded together before its broadcast (one commit), none counted broadcast;
      // the third, held on its way, never reached the node (the others of its batch may have: the
      // proxy forwards them once the third is let go).
      const recorded = (await rows()).filter((x) => Number(x.nonce) >= before);
      expect(recorded.map((x) => Number(x.nonce))).toEqual(range(before, 6));
      for (const x of recorded) expect(x).toMatchObject({ status: 'pending', broadcasts: 0 });
      expect(recorded[2].tx_hash).toBe(held);
      await expect(chain.publicClient.getTransaction({ hash: held! })).rejects.toThrow();

      // A new relayer (a worker restarted) asked for all six: the six recorded come back as they are, broadcast by its settle.
      const r = relayer({ chains: viaProxy });
      const sent = await Promise.all(subs.map(({ id }) => r.sendCharge(chain.chainId, charge(id))));
      expect(sent.map((x) => x.nonce)).toEqual(range(before, 6));
      expect(sent[2].txHash).toBe(held);
      for (const x of sent) expect((await chain.publicClient.waitForTransactionReceipt({ hash: x.txHash })).status).toBe('success');
      expect(await usedNonces()).toBe(before + 6);
      await expectEachChargedOnce(r, subs);
    } finally {
      release();
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      proxy.rewrite(null);
      await proxy.close();
    }
  }, 120_000);
});

describe('the sequence\'s order in the records', () => {
  // nonce and id are read as text (bigints): ordered by those, "10" came before "9", so a nonce's
  // replacement whose id had one digit more than the first's was not its newest row to settle (the
  // old one was broadcast again, replaced again, its drop window measured from the older send).
  it('open transactions come by nonce then age as numbers, not as text', async () => {
    const chainId = 4242;
    const from = '0x00000000000000000000000000000000000000f1';
    const insert = (id: bigint, nonce: number, status: string, replaces: bigint | null) =>
      checkPool.query(
        `insert into relayer_transactions (id, chain_id, from_address, nonce, tx_hash, raw_tx, purpose, subject, contract_address, gas_limit,
           max_fee_per_gas, max_priority_fee_per_gas, status, replaces_id, sent_at_block)
         overriding system value values ($1, $2, $3, $4, $5, '0x', 'charge', $6, $3, 1, 1, 1, $7, $8, 0)`,
        [id.toString(), chainId, from, nonce, keccak256(`0x${id.toString(16).padStart(16, '0')}`), `charge:x:${nonce}`, status, replaces?.toString() ?? null],
      );
    await insert(9_999_999_999n, 9, 'replaced', null);
    await insert(10_000_000_000n, 9, 'pending', 9_999_999_999n);
    await insert(10_000_000_001n, 10, 'pending', null);
    const open = await openRelayerTransactions(checkPool, chainId, from);
    expect(open.map((x) => [x.nonce, x.id])).toEqual([
      ['9', '9999999999'],
      ['9', '10000000000'],
      ['10', '10000000001'],
    ]);
    expect((await relayerTransactionsOf(checkPool, chainId)).map((x) => x.id)).toEqual(['9999999999', '10000000000', '10000000001']);
  });
});
