// A plain transfer that paid an invoice, reorged out by a reorg deeper than the confirmations,
// then broadcast again and included in a later block (docs/payments.md: "it confirms again and
// counts again, once, toward the same invoice, even one that stayed paid"). Found by an
// adversarial review: the row came back 'unmatched' with no invoice (a plain transfer matched only
// open invoices owing its value, and the one it had paid stayed paid), and once the merchant had
// moved to another address it stayed 'removed' (nothing asked for transfers to the old one). Now
// the detector restores it to the invoice it had counted toward (lockPayableInvoices' restoredTo),
// and the watcher asks for the recipients of payments reorged out in the last day
// (recipientsToRescan).
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Address, Hash, Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadChains } from '../../src/chains-config.js';
import { createChainWatcher } from '../../src/chain/watcher.js';
import { createLogger } from '../../src/log.js';
import { startTestChain, type TestChain } from '../helpers/anvil.js';
import { sendLocalInvoice } from '../helpers/chain-fixture.js';
import { startApiFixture, type ApiFixture } from '../helpers/context.js';
import { apiClient, type JsonBody } from '../helpers/http.js';

let chain: TestChain;
let fx: ApiFixture;
let file: string;
const api = apiClient(() => fx.api.app);
const key = () => fx.merchant.keys.sandbox;
const merchant = privateKeyToAccount(generatePrivateKey()).address;
const CONFIRMATIONS = 2n;

beforeAll(async () => {
  chain = await startTestChain();
  file = chain.writeChainsFile(mkdtempSync(path.join(tmpdir(), 'zz-review-reorg-')));
  fx = await startApiFixture({ CHAINS_FILE: file, RATE_LIMIT_MAX: '1000000' });
  expect((await api.patch('/v1/account', key(), { settlement_address: merchant })).status).toBe(200);
  await chain.mine(5);
}, 120_000);
afterAll(async () => {
  await fx?.close();
  await chain?.stop();
});

function watcher(maxBlocks: number) {
  const w = createChainWatcher({ pool: fx.api.pool, chains: loadChains(file, {}), maxBlocks, log: createLogger('silent'), rangesPerRun: 1000 });
  return () => w.run(chain.chainId);
}

async function cursor(): Promise<{ block: bigint; checkpoints: [string, string][] }> {
  const { rows } = await fx.api.pool.query<{ block_number: string; checkpoints: [string, string][] | null }>(
    'select block_number::text, checkpoints from chain_cursors where chain_id = $1',
    [chain.chainId],
  );
  return rows[0] ? { block: BigInt(rows[0].block_number), checkpoints: rows[0].checkpoints ?? [] } : { block: -1n, checkpoints: [] };
}

async function catchUp(run: () => Promise<string>): Promise<string[]> {
  const safe = (await chain.publicClient.getBlockNumber()) - CONFIRMATIONS;
  const outcomes: string[] = [];
  for (let i = 0; i < 20 && (await cursor()).block < safe; i++) outcomes.push(await run());
  expect((await cursor()).block, outcomes.slice(-3).join(' | ')).toBeGreaterThanOrEqual(safe);
  return outcomes;
}

const invoice = async (id: string): Promise<JsonBody> => (await api.get(`/v1/invoices/${id}`, key())).body.data;
const rpc = (method: string, params: unknown[]): Promise<unknown> =>
  (chain.publicClient.request as (args: { method: string; params: unknown[] }) => Promise<unknown>)({ method, params });

async function paymentOf(txHash: Hash) {
  const { rows } = await fx.api.pool.query<{ status: string; outcome: string | null; invoice_id: string | null; reorged_out: boolean; counted_atomic: string | null; block_number: string }>(
    `select status, outcome, invoice_id, reorged_out_at is not null as reorged_out, counted_atomic::text, block_number::text from payments where tx_hash = $1`,
    [txHash.toLowerCase()],
  );
  return rows;
}

describe('a deep-reorged plain transfer, included again later', () => {
  it('counts again toward the invoice it paid (which stayed paid)', () => reincluded({ move: false, rival: false }), 120_000);
  it('the same after the merchant moved off the address: the transfer is asked for again', () => reincluded({ move: true, rival: false }), 120_000);
  it('toward the invoice it paid, not another open invoice at that address owing the same amount', () => reincluded({ move: false, rival: true }), 120_000);
});

async function reincluded({ move, rival }: { move: boolean; rival: boolean }): Promise<void> {
  {
    // A fresh address per case, so the two cases share nothing but the chain.
    const merchant = privateKeyToAccount(generatePrivateKey()).address;
    expect((await api.patch('/v1/account', key(), { settlement_address: merchant })).status).toBe(200);
    const run = watcher(1);
    await catchUp(run);
    const inv = await sendLocalInvoice(api, key(), '3.00');
    const snapshot = await chain.snapshot();
    const forkAt = await chain.publicClient.getBlockNumber();
    const paid = await chain.transfer({ to: merchant as Address, amountAtomic: BigInt(inv.amount_atomic) });
    const raw = (await rpc('eth_getRawTransactionByHash', [paid.txHash])) as Hex;
    expect(raw).toMatch(/^0x/);
    await chain.mine(40);
    await catchUp(run);
    expect(await invoice(inv.id)).toMatchObject({ status: 'paid', amount_paid_atomic: '3000000' });
    const covered = await cursor();

    // The merchant moves to another address; no open invoice names the old one.
    const moved = privateKeyToAccount(generatePrivateKey()).address;
    if (move) expect((await api.patch('/v1/account', key(), { settlement_address: moved })).status).toBe(200);

    // A reorg past every checkpoint: a chain from the fork without the transfer, longer than the cursor.
    await chain.revert(snapshot);
    await chain.mine(Number(covered.block - forkAt) + 5);
    expect(await run()).toMatch(/after a reorg \(rewound to -1\)/);
    await catchUp(watcher(2000));
    expect(await paymentOf(paid.txHash)).toEqual([expect.objectContaining({ status: 'removed', reorged_out: true })]);
    expect(await invoice(inv.id)).toMatchObject({ status: 'paid', amount_paid_atomic: '0' });

    // Another invoice of the same amount to the same address, open: a plain transfer of that value would pay it.
    const other = rival ? await sendLocalInvoice(api, key(), '3.00') : null;

    // The payer's signed transaction is broadcast again and included on the new chain.
    const before = await chain.balanceOf(merchant as Address);
    const again = (await rpc('eth_sendRawTransaction', [raw])) as Hash;
    expect(again.toLowerCase()).toBe(paid.txHash.toLowerCase());
    await chain.mine(1);
    const receipt = await chain.publicClient.getTransactionReceipt({ hash: paid.txHash });
    expect(receipt.status).toBe('success');
    expect(await chain.balanceOf(merchant as Address)).toBe(before + 3_000_000n);
    await chain.mine(4);
    await catchUp(watcher(2000));

    // The money is at the merchant's (former) address again: the payment counts again.
    expect(await paymentOf(paid.txHash)).toEqual([
      expect.objectContaining({ status: 'confirmed', reorged_out: false, block_number: receipt.blockNumber.toString(), outcome: 'applied', invoice_id: inv.id, counted_atomic: '3000000' }),
    ]);
    expect(await invoice(inv.id)).toMatchObject({ status: 'paid', amount_paid_atomic: '3000000' });
    if (other) expect(await invoice(other.id)).toMatchObject({ status: 'open', amount_paid_atomic: '0' });
  }
}
