// `npm run pay`'s rules without a chain: its arguments, what names an invoice, which chains are
// local, and what it would send (or why not).
import { describe, expect, it } from 'vitest';
import type { Chain } from '../../src/domain/chains.js';
import { DEFAULT_PAYER, invoiceHandle, isLoopbackUrl, localRpcUrl, payCommandOptions, planPayment, type InvoiceToPay } from '../../src/devchain/pay-command.js';

const LOCAL: Chain = {
  chainId: 31337,
  network: 'local',
  environment: 'sandbox',
  rpcUrls: ['http://127.0.0.1:8545'],
  confirmations: 2,
  feeProxy: '0x5FbDB2315678afecb367f032d93F642f64180aa3',
  feeAddress: '0xa0Ee7A142d267C1f36714E4a8F75612F20a79720',
  subscriptionManager: null,
  startBlock: 0,
  explorerUrl: null,
  publicRpcUrl: null,
  tokens: [{ currency: 'USDC', address: '0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512', decimals: 6 }],
};

const OPEN: InvoiceToPay = {
  id: 'inv_1',
  code: 'TEST-INV-000001',
  status: 'open',
  currency: 'USDC',
  chainId: 31337,
  network: 'local',
  tokenAddress: '0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512',
  tokenDecimals: 6,
  amountAtomic: 25_000_000n,
  paidAtomic: 0n,
  feeAtomic: 125_000n,
  feeCountedAtomic: 0n,
  feeBps: 50,
  settlementAddress: '0x23618e81E3f5cdF7f54C3d65f7FBc0aBf5B21E8f',
  paymentReference: '0x1a2b3c4d5e6f7a8b',
};

describe('payCommandOptions', () => {
  it('reads the invoice, an amount, --transfer and --key (either form); the default payer is anvil account 0', () => {
    expect(payCommandOptions(['0x1a2b3c4d5e6f7a8b'])).toEqual({ handle: '0x1a2b3c4d5e6f7a8b', amount: null, transfer: false, privateKey: DEFAULT_PAYER.privateKey });
    const key = `0x${'11'.repeat(32)}`;
    expect(payCommandOptions(['inv_1', '10.5', '--transfer', '--key', key])).toEqual({ handle: 'inv_1', amount: '10.5', transfer: true, privateKey: key });
    expect(payCommandOptions([`--key=${key}`, 'inv_1']).privateKey).toBe(key);
  });

  it('refuses no invoice, a third argument, an unknown option and a bad key (without echoing it)', () => {
    expect(() => payCommandOptions([])).toThrow(/which invoice\? \(usage: npm run pay -- /);
    expect(() => payCommandOptions(['a', '1', '2'])).toThrow(/unexpected argument "2"/);
    expect(() => payCommandOptions(['a', '--fast'])).toThrow(/unknown option "--fast"/);
    expect(() => payCommandOptions(['a', '--key'])).toThrow(/--key needs a private key/);
    expect(() => payCommandOptions(['a', '--key', '0xsecret'])).toThrow(/^--key must be a private key: 0x and 64 hexadecimal characters$/);
  });
});

describe('invoiceHandle', () => {
  it('takes a payment page URL (or its status URL) to its reference, anything else as it is', () => {
    expect(invoiceHandle('http://localhost:3000/pay/Zz98Yy76')).toBe('Zz98Yy76');
    expect(invoiceHandle('https://pay.example.test/Zz98Yy76/')).toBe('Zz98Yy76');
    expect(invoiceHandle('http://localhost:3000/pay/Zz98Yy76/status')).toBe('Zz98Yy76');
    expect(invoiceHandle(' inv_1 ')).toBe('inv_1');
    expect(() => invoiceHandle('https://pay.example.test/')).toThrow(/names no invoice/);
  });
});

describe('local chains', () => {
  it('only network local or chain 31337, at an RPC URL on a loopback host', () => {
    for (const url of ['http://127.0.0.1:8545', 'http://localhost:8545', 'http://[::1]:8545', 'http://127.1.2.3:1']) expect(isLoopbackUrl(url), url).toBe(true);
    for (const url of ['http://10.0.0.1:8545', 'https://sepolia.example', 'http://127.0.0.1.example.com', 'nonsense']) expect(isLoopbackUrl(url), url).toBe(false);
    expect(localRpcUrl(LOCAL)).toBe('http://127.0.0.1:8545');
    expect(localRpcUrl({ ...LOCAL, rpcUrls: ['https://node.example', 'http://localhost:9545'] })).toBe('http://localhost:9545');
    expect(localRpcUrl({ ...LOCAL, rpcUrls: ['http://10.1.2.3:8545'] })).toBeNull();
    expect(localRpcUrl({ ...LOCAL, network: 'sepolia', chainId: 11155111 })).toBeNull();
    expect(localRpcUrl({ ...LOCAL, network: 'devnet' })).toBe('http://127.0.0.1:8545');
  });
});

describe('planPayment', () => {
  it('pays what remains exactly as the instructions say, through the proxy', () => {
    expect(planPayment(OPEN, LOCAL, { amount: null, transfer: false })).toMatchObject({
      kind: 'proxy',
      rpcUrl: 'http://127.0.0.1:8545',
      to: OPEN.settlementAddress,
      proxy: LOCAL.feeProxy,
      feeAddress: LOCAL.feeAddress,
      reference: OPEN.paymentReference,
      totalAtomic: 25_000_000n,
      amountAtomic: 24_875_000n,
      feeAtomic: 125_000n,
    });
  });

  it('splits another amount by the fee rule; after a partial payment pays the rest; --transfer sends the total plainly', () => {
    expect(planPayment(OPEN, LOCAL, { amount: '10', transfer: false })).toMatchObject({ totalAtomic: 10_000_000n, amountAtomic: 9_950_000n, feeAtomic: 50_000n });
    expect(planPayment({ ...OPEN, paidAtomic: 10_000_000n }, LOCAL, { amount: null, transfer: false })).toMatchObject({ totalAtomic: 15_000_000n, feeAtomic: 75_000n });
    const transfer = planPayment(OPEN, LOCAL, { amount: null, transfer: true });
    expect(transfer).toMatchObject({ kind: 'transfer', totalAtomic: 25_000_000n, to: OPEN.settlementAddress });
    expect(transfer).not.toHaveProperty('reference');
    // A plain transfer needs no proxy.
    expect(planPayment(OPEN, { ...LOCAL, feeProxy: null }, { amount: '1', transfer: true })).toMatchObject({ kind: 'transfer', totalAtomic: 1_000_000n });
  });

  it.each([
    ['a draft', { status: 'draft' as const, code: null }, /invoice inv_1 is a draft: send it first \(POST \/v1\/invoices\/inv_1\/send\)/],
    ['a paid invoice', { status: 'paid' as const }, /invoice TEST-INV-000001 is already paid/],
    ['a void invoice', { status: 'void' as const }, /invoice TEST-INV-000001 is void/],
    ['no settlement address', { settlementAddress: null, paymentReference: null }, /no payment instructions: its account had no settlement address when it was sent/],
    ['nothing left', { paidAtomic: 25_000_000n }, /nothing left to pay/],
    ['another chain', { chainId: 1 }, /is on chain 1, which is not configured here/],
  ] as [string, Partial<InvoiceToPay>, RegExp][])('refuses %s', (_what, change, message) => {
    // The invoice's chain as configured: none for a chain this process does not know.
    expect(() => planPayment({ ...OPEN, ...change }, change.chainId === 1 ? undefined : LOCAL, { amount: null, transfer: false })).toThrow(message);
  });

  it('refuses a chain that is not local, one without a fee proxy (unless --transfer), and bad amounts', () => {
    expect(() => planPayment(OPEN, { ...LOCAL, rpcUrls: ['https://rpc.example'] }, { amount: null, transfer: true })).toThrow(/is on local \(chain 31337\), not a local chain/);
    expect(() => planPayment(OPEN, { ...LOCAL, feeProxy: null }, { amount: null, transfer: false })).toThrow(/chain 31337 has no fee proxy or fee address \(--transfer pays by plain transfer\)/);
    expect(() => planPayment(OPEN, LOCAL, { amount: '0', transfer: false })).toThrow(/^the amount "0" must be greater than zero$/);
    expect(() => planPayment(OPEN, LOCAL, { amount: '1.0000001', transfer: false })).toThrow(/has more than 6 decimal places/);
    expect(() => planPayment(OPEN, LOCAL, { amount: '1e3', transfer: false })).toThrow(/must be a decimal string/);
  });
});
