// `npm run pay` as a real process against a real chain (anvil with the fee proxy and the test
// USDC) and a test database served by the API: it pays by payment reference, by invoice id and by
// payment page URL, a partial amount, by plain transfer; the tokens really move (the settlement
// address's balance) and a worker turns the invoice paid. Every refusal is one line on stderr,
// exit 1, and sends nothing (the payer's nonce is unchanged).
import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeChainsFile } from '../../src/devchain/chains-file.js';
import type { TestChain } from '../helpers/anvil.js';
import { startChainFixture, type ChainFixture } from '../helpers/chain-fixture.js';
import type { ApiFixture } from '../helpers/context.js';
import { apiClient, type JsonBody } from '../helpers/http.js';
import { extractPdfText } from '../helpers/pdf-text.js';
import { recipientsOf, type SmtpSink } from '../helpers/smtp-sink.js';
import { ROOT, spawnWorker, waitUntil, workerProcessEnv } from '../helpers/worker.js';

let chain: TestChain;
let fx: ApiFixture;
let sink: SmtpSink;
let chainsFile: string;
const api = apiClient(() => fx.api.app);
const key = () => fx.merchant.keys.sandbox;
// A fresh address: its test USDC balance is exactly what it was paid.
const merchant = privateKeyToAccount(generatePrivateKey()).address;
const PAGE_BASE = 'https://pay.example.test';
const EXPLORER = 'https://explorer.example.test';

let fixture: ChainFixture | undefined;
beforeAll(async () => {
  fixture = await startChainFixture({ settlementAddress: merchant, chainsEntry: { explorer_url: EXPLORER }, env: { PAYMENT_PAGE_BASE: PAGE_BASE } });
  ({ chain, fx, sink, chainsFile } = fixture);
}, 120_000);
afterAll(async () => {
  await fixture?.close();
});

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** `npm run pay -- <args>` (or node on main/pay.ts directly: the same entrypoint, a second faster). */
function pay(args: string[], opts: { env?: Record<string, string>; npm?: boolean } = {}): Promise<Run> {
  const command = opts.npm ? ['npm', ['run', '--silent', 'pay', '--', ...args]] : [process.execPath, ['--import', 'tsx', 'main/pay.ts', ...args]];
  const child = spawn(command[0] as string, command[1] as string[], {
    cwd: ROOT,
    env: { ...process.env, DATABASE_URL: fx.env.db.url, CHAINS_FILE: chainsFile, LOG_LEVEL: 'warn', ...opts.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString('utf8')));
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
  return new Promise((resolve) => child.once('exit', (code) => resolve({ code, stdout, stderr })));
}

/** The transaction and block a successful run printed. */
function minedOf(run: Run): { txHash: `0x${string}`; block: bigint } {
  expect(run.stderr, run.stderr).toBe('');
  expect(run.code, run.stdout).toBe(0);
  const m = /^transaction (0x[0-9a-f]{64}) in block (\d+)/m.exec(run.stdout);
  expect(m, run.stdout).not.toBeNull();
  return { txHash: m![1] as `0x${string}`, block: BigInt(m![2]) };
}

/** A refusal: exit 1, one line on stderr matching `message`, nothing on stdout. */
function expectRefusal(run: Run, message: RegExp): void {
  expect(run.code, run.stdout + run.stderr).toBe(1);
  expect(run.stdout).toBe('');
  expect(run.stderr).toMatch(/^npm run pay: [^\n]+\n$/);
  expect(run.stderr).toMatch(message);
}

async function newInvoice(amount: string, opts: { network?: string; send?: boolean; email?: string } = {}): Promise<JsonBody> {
  const created = await api.post('/v1/invoices', key(), { customer_email: opts.email ?? `payer-${Math.random().toString(36).slice(2)}@example.test`, amount, network: opts.network ?? 'local', currency: 'USDC' });
  expect(created.status, created.raw).toBe(200);
  if (opts.send === false) return created.body.data;
  const sent = await api.post(`/v1/invoices/${created.body.data.id}/send`, key());
  expect(sent.status, sent.raw).toBe(200);
  return sent.body.data;
}

const invoice = async (id: string): Promise<JsonBody> => (await api.get(`/v1/invoices/${id}`, key())).body.data;

/** Mines the confirmations and waits for the worker to apply what was paid. */
async function confirmed(id: string, status: string, paidAtomic: string): Promise<JsonBody> {
  await chain.mine(2);
  await waitUntil(async () => {
    const inv = await invoice(id);
    return inv.status === status && inv.amount_paid_atomic === paidAtomic;
  }, 30_000);
  return invoice(id);
}

describe('npm run pay', () => {
  it('pays by payment reference through the fee proxy (approve, then transferFromWithReferenceAndFee): the tokens land, the invoice turns paid, a second run refuses', async () => {
    const email = 'first-payer@example.test';
    const inv = await newInvoice('25.00', { email });
    const pi = inv.payment_instructions;
    const [merchantBefore, feeBefore] = await Promise.all([chain.balanceOf(merchant), chain.balanceOf(chain.feeAddress)]);

    const run = await pay([pi.payment_reference], { npm: true });
    const mined = minedOf(run);
    expect(run.stdout).toContain(`through the fee proxy`);
    expect(run.stdout).toContain(`reference ${pi.payment_reference}`);
    const receipt = await chain.publicClient.getTransactionReceipt({ hash: mined.txHash });
    expect(receipt).toMatchObject({ status: 'success', blockNumber: mined.block, from: chain.payers[0].address.toLowerCase(), to: chain.feeProxy.toLowerCase() });
    expect(await chain.balanceOf(merchant)).toBe(merchantBefore + BigInt(pi.amount_atomic));
    expect(await chain.balanceOf(chain.feeAddress)).toBe(feeBefore + BigInt(pi.fee_atomic));

    const paid = await confirmed(inv.id, 'paid', '25000000');
    expect(paid.amount_remaining_atomic).toBe('0');
    const payments = (await api.get(`/v1/invoices/${inv.id}/payments`, key())).body.data as JsonBody[];
    expect(payments).toEqual([expect.objectContaining({ tx_hash: mined.txHash, kind: 'proxy', outcome: 'applied', fee_collected: true })]);

    expectRefusal(await pay([pi.payment_reference]), new RegExp(`invoice ${inv.code} is already paid`));

    // The documents as the customer got them: the invoice email and its PDF carry the reference
    // beside the address; the receipt email and its PDF name the transaction, linked to the explorer.
    const mailOf = (subject: RegExp) => sink.messages.find((m) => recipientsOf(m).includes(email) && subject.test(m.subject ?? ''));
    await waitUntil(async () => mailOf(/^Invoice /) !== undefined && mailOf(/^Payment received/) !== undefined, 30_000);
    const invoiceMail = mailOf(/^Invoice /)!;
    expect(invoiceMail.text).toContain(`Pay to: ${merchant}\nPayment reference: ${pi.payment_reference}\n`);
    const invoicePdf = (await extractPdfText(invoiceMail.attachments[0].content)).join(' ').replace(/\s+/g, ' ');
    expect(invoicePdf).toContain(`Payment reference: ${pi.payment_reference}`);
    expect(invoicePdf).toContain(`Pay to: ${merchant}`);
    const receiptMail = mailOf(/^Payment received/)!;
    const txUrl = `${EXPLORER}/tx/${mined.txHash}`;
    expect(receiptMail.text).toContain(`Transaction: ${txUrl}`);
    expect(receiptMail.html).toContain(`href="${txUrl}"`);
    const receiptPdf = (await extractPdfText(receiptMail.attachments[0].content)).join('').replace(/\s+/g, '');
    expect(receiptPdf).toContain(`Transaction:${mined.txHash}`);
  }, 120_000);

  it('pays a partial amount by invoice id (its fee by the same rule), then the rest by payment page URL', async () => {
    const inv = await newInvoice('30.00');
    const before = await chain.balanceOf(merchant);

    minedOf(await pay([inv.id, '10']));
    // 10 USDC at the fixture's 50 bps: 0.05 to the fee address, 9.95 to the merchant.
    expect(await chain.balanceOf(merchant)).toBe(before + 9_950_000n);
    const partial = await confirmed(inv.id, 'open', '10000000');
    expect(partial.amount_remaining_atomic).toBe('20000000');
    expect(partial.payment_instructions).toMatchObject({ total_atomic: '20000000', fee_atomic: '100000', amount_atomic: '19900000' });

    const rest = await pay([`${PAGE_BASE}/${inv.reference}`]);
    minedOf(rest);
    expect(rest.stdout).toContain('20 USDC through the fee proxy (19.9 USDC');
    expect(await chain.balanceOf(merchant)).toBe(before + 9_950_000n + 19_900_000n);
    await confirmed(inv.id, 'paid', '30000000');
  }, 120_000);

  it('--transfer sends the remaining total by plain ERC-20 transfer, from another --key; the worker matches it by its exact amount', async () => {
    const inv = await newInvoice('17.31');
    const before = await chain.balanceOf(merchant);
    const payer = chain.payers[3];
    const run = await pay([inv.payment_instructions.payment_reference, '--transfer', '--key', payer.privateKey]);
    const mined = minedOf(run);
    expect(run.stdout).toContain(`Paid invoice ${inv.code} from ${payer.address}: 17.31 USDC by plain transfer to ${merchant}`);
    const receipt = await chain.publicClient.getTransactionReceipt({ hash: mined.txHash });
    expect(receipt).toMatchObject({ from: payer.address.toLowerCase(), to: chain.token.toLowerCase() });
    expect(await chain.balanceOf(merchant)).toBe(before + 17_310_000n);
    await confirmed(inv.id, 'paid', '17310000');
    const [payment] = (await api.get(`/v1/invoices/${inv.id}/payments`, key())).body.data as JsonBody[];
    expect(payment).toMatchObject({ kind: 'transfer', tx_hash: mined.txHash, outcome: 'applied' });
  }, 120_000);

  it('refuses an unknown reference, a draft, a void invoice, a chain that is not local and a bad amount: one line, exit 1, nothing sent', async () => {
    const open = await newInvoice('12.00');
    const draft = await newInvoice('13.00', { send: false });
    const voided = await newInvoice('14.00');
    expect((await api.post(`/v1/invoices/${voided.id}/void`, key())).status).toBe(200);
    // Sepolia is built in: a public chain, whatever its instructions.
    const sepolia = await newInvoice('15.00', { network: 'sepolia' });
    // The local chain as configured elsewhere: network local, but its RPC URL is not on this machine.
    const remoteFile = path.join(mkdtempSync(path.join(tmpdir(), 'pay-remote-')), 'chains.json');
    writeChainsFile(remoteFile, [chain.chainsFileEntry({ rpc_urls: ['http://10.1.2.3:8545'] })]);
    const nonce = await chain.publicClient.getTransactionCount({ address: chain.payers[0].address });
    const merchantBefore = await chain.balanceOf(merchant);

    const cases: [string[], Record<string, string>?][] = [
      [['0x0123456789abcdef']],
      [[draft.id]],
      [[voided.payment_instructions?.payment_reference ?? voided.id]],
      [[sepolia.id]],
      [[open.id], { CHAINS_FILE: remoteFile }],
      [[open.id, '1.2345678']],
      [[open.id, '-3']],
      [[open.id, '--key', 'not-a-key']],
    ];
    // A few at a time: each is a node process compiling TypeScript, on a shared 2-core machine.
    const runs: Run[] = [];
    for (let i = 0; i < cases.length; i += 3) runs.push(...(await Promise.all(cases.slice(i, i + 3).map(([args, env]) => pay(args, { env })))));
    expectRefusal(runs[0], /no invoice has the payment reference, reference or id "0x0123456789abcdef"/);
    expectRefusal(runs[1], new RegExp(`invoice ${draft.id} is a draft: send it first`));
    expectRefusal(runs[2], new RegExp(`invoice ${voided.code} is void`));
    expectRefusal(runs[3], /is on sepolia \(chain 11155111\), not a local chain/);
    expectRefusal(runs[4], /is on local \(chain 31337\), not a local chain/);
    expectRefusal(runs[5], /the amount "1.2345678" has more than 6 decimal places/);
    expectRefusal(runs[6], /the amount "-3" must be a decimal/);
    expectRefusal(runs[7], /--key must be a private key/);
    expect(runs[7].stderr).not.toContain('not-a-key');

    expect(await chain.publicClient.getTransactionCount({ address: chain.payers[0].address })).toBe(nonce);
    expect(await chain.balanceOf(merchant)).toBe(merchantBefore);
    expect((await invoice(open.id)).amount_paid_atomic).toBe('0');
  }, 180_000);
});

describe('found without configuration', () => {
  it('npm run worker with CHAINS_FILE unset uses the chains file of npm run chain (CHAIN_STATE_DIR), says so and watches its chain', async () => {
    const stateDir = path.dirname(chainsFile);
    const worker = spawnWorker(workerProcessEnv(fx.env.config(), { CHAIN_STATE_DIR: stateDir }), { command: 'worker' });
    try {
      const found = await worker.waitForLine((l) => l.msg === 'chains file found', 60_000);
      expect(found.chains_file).toBe(`${path.join(stateDir, 'chains.json')} (found: npm run chain)`);
      const started = await worker.waitForLine((l) => l.msg === 'worker started', 60_000);
      expect(started.watched_chains).toEqual([`local (${chain.chainId}), 2 confirmations`]);
    } finally {
      expect(await worker.stop()).toBe(0);
    }
  }, 120_000);
});
