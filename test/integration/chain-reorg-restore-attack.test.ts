// A payment reorged out and included again goes back to the invoice it had counted toward only if
// it is still a payment of that invoice by its kind's rule (found by an adversarial review of the
// first version of the restore, which skipped the kind's checks). A payment's identity is (tx hash,
// position), and a proxy payment's position is `proxy:<n>`: it says nothing about where the money
// went. The same signed transaction, included again on another chain state, may do something
// else: here a contract whose target its owner flips before the re-broadcast lands calls the proxy
// with the attacker's own settlement address. The re-included payment must not count toward the
// first merchant's invoice (its merchant received nothing on the new chain); it is the attacker's.
// The same holds when the watcher never sees the payment missing: the transaction is re-included
// before it looks, and a confirmed row seen in another block saying something else is reorged out
// and matched again, not just moved (a third review: moved, it kept counting).
import { createRequire } from 'node:module';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { encodeFunctionData, type Abi, type Address, type Hash, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadChains } from '../../src/chains-config.js';
import { createChainWatcher } from '../../src/chain/watcher.js';
import { createLogger } from '../../src/log.js';
import { newId } from '../../src/domain/ids.js';
import { provisionMerchant } from '../../src/runtime/provision.js';
import { TEST_USDC_ABI } from '../../src/devchain/contracts.js';
import { startTestChain, type TestChain } from '../helpers/anvil.js';
import { sendLocalInvoice } from '../helpers/chain-fixture.js';
import { startApiFixture, type ApiFixture } from '../helpers/context.js';
import { apiClient, type JsonBody } from '../helpers/http.js';

const require = createRequire(import.meta.url);

const SOURCE = `
// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;
interface IERC20 { function transferFrom(address, address, uint256) external returns (bool); function approve(address, uint256) external returns (bool); }
interface IFeeProxy { function transferFromWithReferenceAndFee(address, address, uint256, bytes calldata, uint256, address) external; }
contract Switch {
  address public target;
  constructor(address t) { target = t; }
  function set(address t) external { target = t; }
  function pay(address proxy, address token, uint256 amount, bytes calldata ref, uint256 fee, address feeAddress) external {
    IERC20(token).transferFrom(msg.sender, address(this), amount + fee);
    IERC20(token).approve(proxy, amount + fee);
    IFeeProxy(proxy).transferFromWithReferenceAndFee(token, target, amount, ref, fee, feeAddress);
  }
}`;

function compile(): { abi: Abi; bytecode: Hex } {
  const solc = require('solc');
  const out = JSON.parse(
    solc.compile(
      JSON.stringify({
        language: 'Solidity',
        sources: { 'Switch.sol': { content: SOURCE } },
        settings: { optimizer: { enabled: true, runs: 200 }, evmVersion: 'cancun', outputSelection: { '*': { '*': ['abi', 'evm.bytecode.object'] } } },
      }),
    ),
  );
  const errors = (out.errors ?? []).filter((e: { severity: string }) => e.severity === 'error');
  if (errors.length) throw new Error(JSON.stringify(errors));
  const c = out.contracts['Switch.sol'].Switch;
  return { abi: c.abi, bytecode: `0x${c.evm.bytecode.object}` };
}

let chain: TestChain;
let fx: ApiFixture;
let file: string;
const api = apiClient(() => fx.api.app);
const keyA = () => fx.merchant.keys.sandbox;
const merchantA = privateKeyToAccount(generatePrivateKey()).address;
const attackerAddress = privateKeyToAccount(generatePrivateKey()).address;
const CONFIRMATIONS = 2n;

beforeAll(async () => {
  chain = await startTestChain();
  file = chain.writeChainsFile(mkdtempSync(path.join(tmpdir(), 'chain-reorg-restore-')));
  fx = await startApiFixture({ CHAINS_FILE: file, RATE_LIMIT_MAX: '1000000' });
  expect((await api.patch('/v1/account', keyA(), { settlement_address: merchantA })).status).toBe(200);
  // The attacker: another merchant of the same environment, its own settlement address (watched).
  await provisionMerchant(fx.api.pool, { id: newId('acct'), name: 'Attacker', email: 'a@attacker.test', settlementAddress: attackerAddress });
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

async function cursor(): Promise<bigint> {
  const { rows } = await fx.api.pool.query<{ block_number: string }>('select block_number::text from chain_cursors where chain_id = $1', [chain.chainId]);
  return rows[0] ? BigInt(rows[0].block_number) : -1n;
}

async function catchUp(run: () => Promise<string>): Promise<void> {
  const safe = (await chain.publicClient.getBlockNumber()) - CONFIRMATIONS;
  const outcomes: string[] = [];
  for (let i = 0; i < 20 && (await cursor()) < safe; i++) outcomes.push(await run());
  expect(await cursor(), outcomes.slice(-3).join(' | ')).toBeGreaterThanOrEqual(safe);
}

const invoice = async (id: string): Promise<JsonBody> => (await api.get(`/v1/invoices/${id}`, keyA())).body.data;
const rpc = (method: string, params: unknown[]): Promise<unknown> =>
  (chain.publicClient.request as (args: { method: string; params: unknown[] }) => Promise<unknown>)({ method, params });

async function send(from: Address, to: Address | null, data: Hex): Promise<{ hash: Hash; contract: Address | null }> {
  const hash = (await rpc('eth_sendTransaction', [{ from, ...(to ? { to } : {}), data, gas: '0x200000' }])) as Hash;
  const r = await chain.publicClient.waitForTransactionReceipt({ hash });
  expect(r.status).toBe('success');
  return { hash, contract: r.contractAddress ?? null };
}

/** Runs the watcher until its cursor reaches `target` (a rescan after a reorg takes several runs). */
async function catchUpTo(run: () => Promise<string>, target: bigint): Promise<string[]> {
  const outcomes: string[] = [];
  for (let i = 0; i < 40 && (await cursor()) < target; i++) outcomes.push(await run());
  expect(await cursor(), outcomes.slice(-3).join(' | ')).toBeGreaterThanOrEqual(target);
  return outcomes;
}

async function paymentOf(txHash: Hash) {
  const { rows } = await fx.api.pool.query(
    `select status, outcome, invoice_id, account_id, to_address, counted_atomic::text, reorged_out_at is not null as reorged_out from payments where tx_hash = $1`,
    [txHash.toLowerCase()],
  );
  return rows;
}

/**
 * The payer's contract, switched to pay merchant A, pays 1.00 (fee by the rule) of a 3.00 invoice
 * of A's with its reference; mined to confirmed and counted. Returns what the attacks need: the
 * snapshot before the payment (the fork), the signed transaction, how far the watcher got.
 */
async function paidThroughSwitch(payerIndex: number) {
  const { abi, bytecode } = compile();
  const payer = chain.payers[payerIndex].address as Address;
  const other = chain.payers[payerIndex + 1].address as Address;
  // The contract and the payer's allowance to it, both before the fork.
  const deployData = (bytecode + merchantA.slice(2).toLowerCase().padStart(64, '0')) as Hex;
  const { contract } = await send(payer, null, deployData);
  const sw = contract!;
  await send(payer, chain.token, encodeFunctionData({ abi: TEST_USDC_ABI, functionName: 'approve', args: [sw, 10n ** 30n] }));
  await chain.mine(1);
  const run = watcher(1);
  await catchUp(run);

  const inv = await sendLocalInvoice(api, keyA(), '3.00');
  const pi = inv.payment_instructions;
  const snapshot = await chain.snapshot();
  const forkAt = await chain.publicClient.getBlockNumber();
  const total = 1_000_000n;
  const fee = 5_000n;
  const payData = encodeFunctionData({ abi, functionName: 'pay', args: [chain.feeProxy, chain.token, total - fee, pi.payment_reference as Hex, fee, chain.feeAddress] });
  const { hash: paid } = await send(payer, sw, payData);
  const raw = (await rpc('eth_getRawTransactionByHash', [paid])) as Hex;
  await chain.mine(40);
  await catchUp(run);
  expect(await invoice(inv.id)).toMatchObject({ status: 'open', amount_paid_atomic: '1000000' });
  return { abi, sw, other, run, inv, snapshot, forkAt, paid, raw, total, fee, covered: await cursor() };
}

describe('a proxy payment reorged out and included again paying someone else', () => {
  it('is not counted toward the invoice it had paid when its money now went to another address', async () => {
    const { abi, sw, other, run, inv, snapshot, forkAt, paid, raw, total, fee, covered } = await paidThroughSwitch(0);

    // A reorg deeper than the confirmations: the payment leaves the chain.
    await chain.revert(snapshot);
    // On the new chain, before the payer's transaction is broadcast again, the switch now points at the attacker.
    await send(other, sw, encodeFunctionData({ abi, functionName: 'set', args: [attackerAddress] }));
    await chain.mine(Number(covered - forkAt) + 5);
    expect(await run()).toMatch(/after a reorg/);
    await catchUp(watcher(2000));
    expect(await paymentOf(paid)).toEqual([expect.objectContaining({ status: 'removed', reorged_out: true })]);
    expect(await invoice(inv.id)).toMatchObject({ amount_paid_atomic: '0' });

    // The same signed transaction, included again: this time the proxy pays the attacker's address.
    const aBefore = await chain.balanceOf(merchantA);
    const xBefore = await chain.balanceOf(attackerAddress);
    expect(((await rpc('eth_sendRawTransaction', [raw])) as string).toLowerCase()).toBe(paid.toLowerCase());
    await chain.mine(1);
    expect((await chain.publicClient.getTransactionReceipt({ hash: paid })).status).toBe('success');
    expect(await chain.balanceOf(merchantA)).toBe(aBefore);
    expect(await chain.balanceOf(attackerAddress)).toBe(xBefore + total - fee);
    await chain.mine(4);
    await catchUp(watcher(2000));

    // Merchant A received nothing on the canonical chain: its invoice does not count this payment;
    // it is the attacker's own, unmatched, at the attacker's address.
    expect(await invoice(inv.id)).toMatchObject({ status: 'open', amount_paid_atomic: '0' });
    const rows = await paymentOf(paid);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ status: 'confirmed', outcome: 'unmatched', invoice_id: null });
    expect(String(rows[0].to_address).toLowerCase()).toBe(attackerAddress.toLowerCase());
    expect(rows[0].account_id).not.toBe(fx.merchant.accountId);
  }, 180_000);

  it('is not counted toward it either when the watcher never saw it missing (re-included before the rescan): reorged out, then the attacker\'s', async () => {
    const { abi, sw, other, inv, snapshot, forkAt, paid, raw, total, fee, covered } = await paidThroughSwitch(2);
    const aBefore = await chain.balanceOf(merchantA);
    const xBefore = await chain.balanceOf(attackerAddress);

    // A reorg deeper than the confirmations; on the new chain the switch points at the attacker and
    // the same signed transaction is included again, all before the watcher looks.
    await chain.revert(snapshot);
    await send(other, sw, encodeFunctionData({ abi, functionName: 'set', args: [attackerAddress] }));
    expect(((await rpc('eth_sendRawTransaction', [raw])) as string).toLowerCase()).toBe(paid.toLowerCase());
    await chain.mine(1);
    expect((await chain.publicClient.getTransactionReceipt({ hash: paid })).status).toBe('success');
    await chain.mine(Number(covered - forkAt) + 5);
    // On the canonical chain merchant A never received the payment; the attacker did.
    expect(await chain.balanceOf(merchantA)).toBe(aBefore - (total - fee));
    expect(await chain.balanceOf(attackerAddress)).toBe(xBefore + total - fee);
    const outcomes = await catchUpTo(watcher(2000), (await chain.publicClient.getBlockNumber()) - CONFIRMATIONS);
    expect(outcomes.join(' | ')).toMatch(/after a reorg/);

    expect(await invoice(inv.id)).toMatchObject({ status: 'open', amount_paid_atomic: '0' });
    const rows = await paymentOf(paid);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ status: 'confirmed', outcome: 'unmatched', invoice_id: null });
    expect(String(rows[0].to_address).toLowerCase()).toBe(attackerAddress.toLowerCase());
    // Merchant A was told its payment left the chain.
    const { rows: told } = await fx.api.pool.query<{ type: string }>(
      `select e.type from events e join payments p on p.id = e.object_id where e.account_id = $1 and p.tx_hash = $2 order by e.created_at, e.id`,
      [fx.merchant.accountId, paid.toLowerCase()],
    );
    expect(told.map((e) => e.type)).toEqual(['payment.confirmed', 'payment.reorged_out']);
  }, 180_000);
});
