// Paid means paid, attacked on anvil through the watcher's own RPC path (a rewriting proxy, one
// watcher run at a time): many payments in one block, the same reference paid twice in one block,
// a second tenant with the same amounts, and a lying node: logs answered twice, a forged log in a
// block the node has with another hash, a forged log above the head (with and without its own
// blockTimestamp). A forged answer fails the run and nothing of it is recorded; once the node
// stops lying the scan goes on, and the forged payment never counts.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createWalletClient, http, maxUint256, type Address, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { FEE_PROXY_ABI } from '../../src/chain/abi.js';
import { createChainWatcher } from '../../src/chain/watcher.js';
import { loadChains } from '../../src/chains-config.js';
import { TEST_USDC_ABI } from '../../src/devchain/contracts.js';
import { newId } from '../../src/domain/ids.js';
import { createLogger } from '../../src/log.js';
import { createMetrics } from '../../src/observability/metrics.js';
import { provisionMerchant } from '../../src/runtime/provision.js';
import { startRpcProxy, startTestChain, type JsonRpcRequest, type RpcProxy, type TestChain } from '../helpers/anvil.js';
import { startApiFixture, type ApiFixture } from '../helpers/context.js';
import { apiClient, type JsonBody } from '../helpers/http.js';
import { waitUntil } from '../helpers/worker.js';

let chain: TestChain;
let fx: ApiFixture;
let proxy: RpcProxy;
let other: { accountId: string; keys: { sandbox: string } };
const api = apiClient(() => fx.api.app);
const keyA = () => fx.merchant.keys.sandbox;
const keyB = () => other.keys.sandbox;
const merchantA = privateKeyToAccount(generatePrivateKey()).address;
const merchantB = privateKeyToAccount(generatePrivateKey()).address;
let run: () => Promise<string>;
let newWatcher: () => void;
let wallet: ReturnType<typeof createWalletClient>;

beforeAll(async () => {
  chain = await startTestChain();
  proxy = await startRpcProxy(chain.rpcUrl);
  const dir = mkdtempSync(path.join(tmpdir(), 'zz-attack-'));
  fx = await startApiFixture({ CHAINS_FILE: chain.writeChainsFile(dir), RATE_LIMIT_MAX: '1000000' });
  expect((await api.patch('/v1/account', keyA(), { settlement_address: merchantA })).status).toBe(200);
  other = (await provisionMerchant(fx.api.pool, { id: newId('acct'), name: 'Tenant B', email: null })) as never;
  expect((await api.patch('/v1/account', keyB(), { settlement_address: merchantB })).status).toBe(200);
  // Same settlement address for B: refused (the address is A's).
  expect((await api.patch('/v1/account', keyB(), { settlement_address: merchantA })).status).toBe(409);
  for (const k of [keyA(), keyB()]) {
    const ep = await api.post('/v1/webhook_endpoints', k, { url: 'https://93.184.215.14/hooks', enabled_events: ['*'] });
    expect(ep.status, ep.raw).toBe(200);
  }
  const file = chain.writeChainsFile(dir, { rpc_urls: [proxy.url] });
  newWatcher = () => {
    const log = createLogger('info', { write: () => undefined });
    const metrics = createMetrics({ queues: [], db: fx.api.pool, defaultMetrics: false });
    const watcher = createChainWatcher({ pool: fx.api.pool, chains: loadChains(file, {}), maxBlocks: 2000, log, metrics: metrics.chain });
    run = () => watcher.run(chain.chainId);
  };
  newWatcher();
  wallet = createWalletClient({ transport: http(chain.rpcUrl) });
  for (const p of chain.payers.slice(0, 6)) {
    await wallet.writeContract({ account: p.address, chain: null, address: chain.token, abi: TEST_USDC_ABI, functionName: 'approve', args: [chain.feeProxy, maxUint256] });
  }
  await chain.mine(5);
  await catchUp();
}, 180_000);
afterEach(() => proxy.rewrite(null));
afterAll(async () => {
  await fx?.close();
  await proxy?.close();
  await chain?.stop();
});

async function cursor(): Promise<bigint> {
  const { rows } = await fx.api.pool.query<{ b: string }>('select block_number::text as b from chain_cursors where chain_id = $1', [chain.chainId]);
  return rows[0] ? BigInt(rows[0].b) : -1n;
}
/**
 * Watcher runs until the cursor reaches the safe head, through a back-off a forged answer left (a
 * run that throws rejects it).
 */
async function catchUp(): Promise<string[]> {
  await chain.mine(3);
  const safe = (await chain.publicClient.getBlockNumber()) - 2n;
  const outs: string[] = [];
  await waitUntil(async () => {
    if ((await cursor()) >= safe) return true;
    outs.push(await run());
    return (await cursor()) >= safe;
  }, 30_000, 20);
  return outs;
}
async function sent(key: string, amount: string): Promise<JsonBody> {
  const c = await api.post('/v1/invoices', key, { customer_email: `p-${Math.random().toString(36).slice(2)}@example.test`, amount, network: 'local', currency: 'USDC' });
  expect(c.status, c.raw).toBe(200);
  const s = await api.post(`/v1/invoices/${c.body.data.id}/send`, key);
  expect(s.status, s.raw).toBe(200);
  return s.body.data;
}
const inv = async (id: string, key = keyA()) => (await api.get(`/v1/invoices/${id}`, key)).body.data;
/** Sends without waiting (automine off by the caller). */
const sendPay = (from: Address, to: Address, amount: bigint, reference: Hex, fee = 0n) =>
  wallet.writeContract({ account: from, chain: null, address: chain.feeProxy, abi: FEE_PROXY_ABI, functionName: 'transferFromWithReferenceAndFee', args: [chain.token, to, amount, reference, fee, chain.feeAddress], gas: 200_000n });
const sendTransfer = (from: Address, to: Address, amount: bigint) =>
  wallet.writeContract({ account: from, chain: null, address: chain.token, abi: TEST_USDC_ABI, functionName: 'transfer', args: [to, amount], gas: 100_000n });
async function inOneBlock(send: () => Promise<unknown>): Promise<void> {
  await chain.testClient.setAutomine(false);
  try {
    await send();
    await chain.mine(1);
  } finally {
    await chain.testClient.setAutomine(true);
  }
}
async function counts(invoiceId: string) {
  const q = async (sql: string) => (await fx.api.pool.query<{ n: number; a: string | null }>(sql, [invoiceId])).rows;
  const ev = await q(`select type as a, count(*)::int as n from events where object_id = $1 group by type`);
  const evAcct = await q(`select distinct account_id as a, 0 as n from events where object_id = $1 or (object_type = 'payment' and object->>'invoice_id' = $1)`);
  const whd = await q(`select count(*)::int as n, null as a from webhook_deliveries d join events e on e.id = d.event_id where e.object_id = $1 and e.type = 'invoice.paid'`);
  const rcpt = await q(`select count(*)::int as n, null as a from deliveries where invoice_id = $1 and kind = 'receipt'`);
  const ob = await q(`select count(*)::int as n, null as a from outbox where job_name = 'invoice.receipt' and payload->>'invoiceId' = $1`);
  const pc = await q(`select count(*)::int as n, null as a from events where object_type = 'payment' and type = 'payment.confirmed' and object->>'invoice_id' = $1`);
  const pr = await q(`select count(*)::int as n, null as a from payments where invoice_id = $1 and status = 'confirmed'`);
  return { events: Object.fromEntries(ev.map((r) => [r.a, r.n])), accounts: evAcct.map((r) => r.a), paidWebhooks: whd[0].n, receipts: rcpt[0].n, outbox: ob[0].n, paymentConfirmedEvents: pc[0].n, confirmedPayments: pr[0].n };
}

describe('a payer', () => {
  it('20 transfers of 4.99 USDC plus one 0.19 in one block to the settlement address: 100 USDC invoice open at 99.99... then paid exactly', async () => {
    const i = await sent(keyA(), '100.00');
    const ref = i.payment_instructions.payment_reference as Hex;
    // 20 proxy payments of 4.99 from 5 payers in one block: 99.80 USDC.
    await inOneBlock(async () => {
      for (let k = 0; k < 20; k++) await sendPay(chain.payers[k % 5].address, merchantA, 4_990_000n, ref);
    });
    // 0.19 more the next block, then 0.009999 short still: nothing more; one more unit: paid.
    await inOneBlock(async () => {
      await sendPay(chain.payers[0].address, merchantA, 190_000n, ref);
      await sendPay(chain.payers[1].address, merchantA, 9_999n, ref);
    });
    await catchUp();
    let now = await inv(i.id);
    expect(now).toMatchObject({ status: 'open', amount_paid_atomic: String(99_800_000 + 190_000 + 9_999) });
    await inOneBlock(() => sendPay(chain.payers[2].address, merchantA, 1n, ref));
    await catchUp();
    now = await inv(i.id);
    expect(now).toMatchObject({ status: 'paid', amount_paid_atomic: '100000000' });
    const c = await counts(i.id);
    expect(c).toMatchObject({ paidWebhooks: 1, receipts: 1, outbox: 1, paymentConfirmedEvents: 23, confirmedPayments: 23 });
    expect(c.events['invoice.paid']).toBe(1);
    expect(c.accounts).toEqual([fx.merchant.accountId]);
  }, 120_000);

  it('the same reference paid twice in full in one block: the first pays it, the second counts for nothing; one invoice.paid, one receipt', async () => {
    const i = await sent(keyA(), '100.00');
    const ref = i.payment_instructions.payment_reference as Hex;
    await inOneBlock(async () => {
      await sendPay(chain.payers[3].address, merchantA, 100_000_000n, ref);
      await sendPay(chain.payers[4].address, merchantA, 100_000_000n, ref);
    });
    await catchUp();
    const now = await inv(i.id);
    const { rows } = await fx.api.pool.query<{ outcome: string; counted_atomic: string | null }>('select outcome, counted_atomic from payments where invoice_id = $1 order by block_number, log_index', [i.id]);
    expect(now).toMatchObject({ status: 'paid', amount_paid_atomic: '100000000' });
    expect(rows.map((r) => r.outcome)).toEqual(['applied', 'invoice_already_paid']);
    const c = await counts(i.id);
    expect(c).toMatchObject({ paidWebhooks: 1, receipts: 1, outbox: 1, paymentConfirmedEvents: 2 });
    expect(c.events['invoice.paid']).toBe(1);
  }, 120_000);

  it('a plain transfer of exactly the amount plus a proxy payment of the same invoice in one block: the invoice is paid once, not doubled', async () => {
    const i = await sent(keyA(), '37.00');
    const ref = i.payment_instructions.payment_reference as Hex;
    await inOneBlock(async () => {
      await sendTransfer(chain.payers[0].address, merchantA, 37_000_000n);
      await sendPay(chain.payers[1].address, merchantA, 37_000_000n, ref);
    });
    await catchUp();
    const now = await inv(i.id);
    const { rows } = await fx.api.pool.query<{ kind: string; outcome: string; counted_atomic: string | null; invoice_id: string | null }>(
      `select kind, outcome, counted_atomic, invoice_id from payments where lower(to_address) = lower($1) and block_number = (select max(block_number) from payments where invoice_id = $2)`, [merchantA, i.id]);
    expect(now).toMatchObject({ status: 'paid', amount_paid_atomic: '37000000' });
    expect(rows.filter((r) => r.invoice_id === i.id && r.outcome === 'applied')).toHaveLength(1);
    expect((await counts(i.id))).toMatchObject({ receipts: 1, outbox: 1, paidWebhooks: 1 });
  }, 120_000);
});

describe('a tenant', () => {
  it("two tenants' invoices of the same amount, paid in one block by plain transfers: each to its own address counts only for its own account", async () => {
    const a = await sent(keyA(), '12.34');
    const b = await sent(keyB(), '12.34');
    expect(a.payment_instructions.to).toBe(merchantA);
    expect(b.payment_instructions.to).toBe(merchantB);
    // B's reference sent to A's address: must not pay B (value did not reach B's address).
    await inOneBlock(async () => {
      await sendPay(chain.payers[0].address, merchantA, 12_340_000n, b.payment_instructions.payment_reference as Hex);
    });
    await catchUp();
    expect(await inv(b.id, keyB())).toMatchObject({ status: 'open', amount_paid_atomic: '0' });
    // Now a plain exact transfer to B's address in the same block as one to A's address.
    await inOneBlock(async () => {
      await sendTransfer(chain.payers[1].address, merchantB, 12_340_000n);
      await sendTransfer(chain.payers[2].address, merchantA, 12_340_000n);
    });
    await catchUp();
    const [na, nb] = [await inv(a.id), await inv(b.id, keyB())];
    expect(nb).toMatchObject({ status: 'paid', amount_paid_atomic: '12340000' });
    expect(na.status).toBe('paid');
    const ca = await counts(a.id);
    const cb = await counts(b.id);
    expect(ca.accounts).toEqual([fx.merchant.accountId]);
    expect(cb.accounts).toEqual([other.accountId]);
    expect(cb).toMatchObject({ receipts: 1, outbox: 1, paidWebhooks: 1 });
    expect(ca).toMatchObject({ receipts: 1, outbox: 1, paidWebhooks: 1 });
    // Webhook deliveries for B's invoice events go only to B's endpoint.
    const { rows } = await fx.api.pool.query<{ account_id: string }>(
      `select distinct w.account_id from webhook_deliveries d join events e on e.id = d.event_id join webhook_endpoints w on w.id = d.endpoint_id where e.object_id = $1 or e.object->>'invoice_id' = $1`, [b.id]);
    expect(rows.map((r) => r.account_id)).toEqual([other.accountId]);
    const { rows: bad } = await fx.api.pool.query(`select 1 from webhook_deliveries d join events e on e.id = d.event_id join webhook_endpoints w on w.id = d.endpoint_id where w.account_id <> e.account_id`);
    expect(bad).toHaveLength(0);
  }, 120_000);
});

describe('a lying node', () => {
  const hex = (n: bigint) => `0x${n.toString(16)}`;
  const TRANSFER_TOPIC = '0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef';
  const pad = (a: string) => `0x${a.slice(2).toLowerCase().padStart(64, '0')}`;

  async function withForged(forge: (req: JsonRpcRequest, logs: Record<string, unknown>[]) => Record<string, unknown>[]): Promise<void> {
    proxy.rewrite(async (req, real) => {
      if (req.method !== 'eth_getLogs') return undefined;
      const ans = await real();
      if (!Array.isArray(ans.result)) return ans;
      return { ...ans, result: forge(req, ans.result as Record<string, unknown>[]) };
    });
  }

  it('every log answered twice: the invoice counts it once', async () => {
    const i = await sent(keyA(), '100.00');
    await withForged((_req, logs) => [...logs, ...logs]);
    await inOneBlock(() => sendPay(chain.payers[0].address, merchantA, 60_000_000n, i.payment_instructions.payment_reference as Hex));
    await catchUp();
    expect(await inv(i.id)).toMatchObject({ status: 'open', amount_paid_atomic: '60000000' });
    expect(await counts(i.id)).toMatchObject({ confirmedPayments: 1, paymentConfirmedEvents: 1 });
  }, 120_000);

  it('a forged Transfer of exactly the amount, in-range block number, a block hash and tx the node does not have: nothing counts', async () => {
    const i = await sent(keyA(), '55.55');
    const from = await cursor();
    const fakeHash = `0x${'ab'.repeat(32)}`;
    const fakeTx = `0x${'cd'.repeat(32)}`;
    let injected = 0;
    await withForged((req, logs) => {
      const f = (req.params?.[0] ?? {}) as { fromBlock?: string; address?: unknown; topics?: unknown[] };
      const addr = Array.isArray(f.address) ? f.address : [f.address];
      if (!addr.some((x) => typeof x === 'string' && x.toLowerCase() === chain.token.toLowerCase())) return logs;
      if (!f.fromBlock || BigInt(f.fromBlock) <= from) return logs;
      injected++;
      return [...logs, {
        address: chain.token, topics: [TRANSFER_TOPIC, pad(chain.payers[5].address), pad(merchantA)], data: pad(hex(55_550_000n)),
        blockNumber: f.fromBlock, blockHash: fakeHash, transactionHash: fakeTx, transactionIndex: '0x0', logIndex: '0x0', removed: false,
      }];
    });
    await expect(catchUp()).rejects.toThrow(/which the node has as 0x/);
    expect(injected).toBeGreaterThan(0);
    proxy.rewrite(null);
    await catchUp();
    expect(await inv(i.id)).toMatchObject({ status: 'open', amount_paid_atomic: '0' });
    expect((await fx.api.pool.query('select 1 from payments where tx_hash = $1', [fakeTx])).rows).toEqual([]);
  }, 120_000);

  it('a forged Transfer for a block above the head: nothing counts', async () => {
    const i = await sent(keyA(), '66.66');
    const fakeTx = `0x${'ef'.repeat(32)}`;
    let injected = 0;
    await withForged((req, logs) => {
      const f = (req.params?.[0] ?? {}) as { toBlock?: string; address?: unknown };
      const addr = Array.isArray(f.address) ? f.address : [f.address];
      if (!addr.some((x) => typeof x === 'string' && x.toLowerCase() === chain.token.toLowerCase())) return logs;
      injected++;
      return [...logs, {
        address: chain.token, topics: [TRANSFER_TOPIC, pad(chain.payers[5].address), pad(merchantA)], data: pad(hex(66_660_000n)),
        blockNumber: hex(10n ** 9n), blockHash: `0x${'12'.repeat(32)}`, transactionHash: fakeTx, transactionIndex: '0x0', logIndex: '0x0', removed: false,
      }];
    });
    await expect(catchUp()).rejects.toThrow(/a log of block 1000000000 .* in the answer for blocks/);
    expect(injected).toBeGreaterThan(0);
    proxy.rewrite(null);
    await catchUp();
    expect(await inv(i.id)).toMatchObject({ status: 'open', amount_paid_atomic: '0' });
    expect((await fx.api.pool.query('select 1 from payments where tx_hash = $1', [fakeTx])).rows).toEqual([]);
  }, 120_000);
  it('a forged Transfer for a block above the head that carries its own blockTimestamp: nothing counts', async () => {
    const i = await sent(keyA(), '77.77');
    const fakeTx = `0x${'9a'.repeat(32)}`;
    let injected = 0;
    await withForged((req, logs) => {
      const f = (req.params?.[0] ?? {}) as { address?: unknown };
      const addr = Array.isArray(f.address) ? f.address : [f.address];
      if (!addr.some((x) => typeof x === 'string' && x.toLowerCase() === chain.token.toLowerCase())) return logs;
      injected++;
      return [...logs, {
        address: chain.token, topics: [TRANSFER_TOPIC, pad(chain.payers[5].address), pad(merchantA)], data: pad(hex(77_770_000n)),
        blockNumber: hex(10n ** 9n), blockHash: `0x${'34'.repeat(32)}`, blockTimestamp: hex(1_700_000_000n), transactionHash: fakeTx, transactionIndex: '0x0', logIndex: '0x0', removed: false,
      }];
    });
    await expect(catchUp()).rejects.toThrow(/a log of block 1000000000 .* in the answer for blocks/);
    expect(injected).toBeGreaterThan(0);
    proxy.rewrite(null);
    await catchUp();
    expect(await inv(i.id)).toMatchObject({ status: 'open', amount_paid_atomic: '0' });
    expect((await fx.api.pool.query('select 1 from payments where tx_hash = $1', [fakeTx])).rows).toEqual([]);
  }, 120_000);
});
