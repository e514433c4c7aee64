// The payer's page shows only an RPC URL the configuration marks public (issue 24 #9): a
// deployment's own RPC URLs (CHAINS_FILE rpc_urls, RPC_URL_<chainId>) carry API keys and never
// reach GET /pay/<reference>/status or the page's HTML. A chain's `public_rpc_url` is shown; a
// built-in chain shows its known public endpoint; otherwise none (the wallet uses its own). Plus
// what the invoice email says of paying on-chain on a chain with and without a fee proxy.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadChains } from '../../src/chains-config.js';
import { loadInvoiceForMail } from '../../src/db/invoice-for-mail.js';
import { renderEmail } from '../../src/mail/render-email.js';
import type { JsonBody } from '../helpers/http.js';
import { useApiFixture } from '../helpers/http.js';

const SECRET = 'SeCrEtKeY0123456789';
const SETTLEMENT = '0x1111111111111111111111111111111111111111';
const token = (address: string) => [{ currency: 'USDC', address, decimals: 6 }];
const proxyed = { fee_proxy: '0x5FbDB2315678afecb367f032d93F642f64180aa3', fee_address: '0xa0Ee7A142d267C1f36714E4a8F75612F20a79720', start_block: 0, confirmations: 2 };
const dir = mkdtempSync(path.join(tmpdir(), 'rpc-url-'));
const chainsFile = path.join(dir, 'chains.json');
writeFileSync(
  chainsFile,
  JSON.stringify([
    // The local chain's id, but its RPC URL is a provider's with a key in path and query.
    { chain_id: 31337, network: 'local', environment: 'sandbox', rpc_urls: [`https://rpc.example.test/v2/${SECRET}?apikey=${SECRET}`], explorer_url: null, tokens: token('0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512'), ...proxyed },
    // A chain of the deployment's own, with an RPC URL it marks public.
    { chain_id: 777001, network: 'privnet', environment: 'sandbox', rpc_urls: [`wss://node.example.test/${SECRET}`], public_rpc_url: 'https://public.example.test/rpc', explorer_url: null, tokens: token('0x9fE46736679d2D9a65F0992F2272dE9f3c7fa6e0'), ...proxyed },
  ]),
);

describe('the RPC URL a payer may see', () => {
  const ctx = useApiFixture({ otherMerchant: false, overrides: { CHAINS_FILE: chainsFile, RPC_URL_84532: `https://base-sepolia.example.test/${SECRET}` } });

  async function sentOn(network: string): Promise<JsonBody> {
    const set = await ctx.patch('/v1/account', ctx.keys.sandbox, { settlement_address: SETTLEMENT });
    expect(set.status, set.raw).toBe(200);
    const created = await ctx.post('/v1/invoices', ctx.keys.sandbox, { customer_email: 'payer@example.test', amount: '12.5', network, currency: 'USDC' });
    expect(created.status, created.raw).toBe(200);
    const sent = await ctx.post(`/v1/invoices/${created.body.data.id}/send`, ctx.keys.sandbox);
    expect(sent.status, sent.raw).toBe(200);
    return sent.body.data;
  }

  async function pageAndStatus(reference: string): Promise<{ html: string; status: JsonBody; raw: string }> {
    const page = await ctx.fx.api.app.inject({ method: 'GET', url: `/pay/${reference}` });
    expect(page.statusCode).toBe(200);
    const status = await ctx.fx.api.app.inject({ method: 'GET', url: `/pay/${reference}/status` });
    expect(status.statusCode).toBe(200);
    return { html: page.body, status: status.json<JsonBody>(), raw: status.body };
  }

  it('a chains file whose rpc_urls hold a key: neither the status nor the page contains it; the wallet gets no URL', async () => {
    const inv = await sentOn('local');
    expect(inv.payment_instructions).not.toBeNull();
    const { html, status, raw } = await pageAndStatus(inv.reference);
    expect(status.chain).toEqual({ chain_id: 31337, name: 'local', rpc_url: null, explorer_url: null, native_symbol: 'ETH' });
    for (const text of [html, raw]) {
      expect(text).not.toContain(SECRET);
      expect(text).not.toContain('rpc.example.test');
    }
  });

  it("a chain's public_rpc_url is what the wallet gets, never its rpc_urls", async () => {
    const inv = await sentOn('privnet');
    const { html, status, raw } = await pageAndStatus(inv.reference);
    expect(status.chain).toMatchObject({ chain_id: 777001, rpc_url: 'https://public.example.test/rpc' });
    for (const text of [html, raw]) {
      expect(text).not.toContain(SECRET);
      expect(text).not.toContain('node.example.test');
    }
  });

  it("a built-in chain whose RPC URL comes from RPC_URL_<chainId>: its known public endpoint, not the deployment's", async () => {
    const inv = await sentOn('base-sepolia');
    const { html, status, raw } = await pageAndStatus(inv.reference);
    expect(status.chain).toMatchObject({ chain_id: 84532, rpc_url: 'https://sepolia.base.org' });
    for (const text of [html, raw]) expect(text).not.toContain(SECRET);
  });

  it('the email says only what is true of paying on-chain: the fee proxy and the page\'s wallet only where the invoice has payment instructions', async () => {
    const withProxy = await sentOn('local');
    const withoutProxy = await sentOn('base-sepolia');
    expect(withoutProxy.payment_instructions).toBeNull();
    const mail = async (id: string) => {
      const loaded = await loadInvoiceForMail(ctx.fx.api.pool, id, { paymentPageBase: 'https://pay.example.test/pay', chains: loadChains(chainsFile, {}) });
      return renderEmail('invoice', loaded!.doc).text;
    };
    expect(await mail(withProxy.id)).toContain('Pay through the fee proxy with this reference (a wallet on the payment page does it)');
    const plain = await mail(withoutProxy.id);
    expect(plain).toContain(`Payment reference: ${withoutProxy.payment_reference ?? ''}`.trim());
    expect(plain).not.toContain('fee proxy');
    expect(plain).toContain('Pay by plain transfer of exactly this amount to this address.');
  });

  it('public_rpc_url is checked like the other URLs of the file: a bad one stops the start in one line naming it', () => {
    const bad = path.join(dir, 'bad.json');
    writeFileSync(bad, JSON.stringify([{ chain_id: 84532, public_rpc_url: 'not a url' }]));
    expect(() => loadChains(bad, {})).toThrow(`${bad}[0].public_rpc_url must be a URL, got "not a url"`);
    writeFileSync(bad, JSON.stringify([{ chain_id: 84532, public_rpc_url: 'ftp://x.example.test/' }]));
    expect(() => loadChains(bad, {})).toThrow('[0].public_rpc_url must be an absolute http(s) or ws(s) URL');
    writeFileSync(bad, JSON.stringify([{ chain_id: 84532, public_rpc_url: null }]));
    expect(loadChains(bad, {}).find((c) => c.chainId === 84532)?.publicRpcUrl).toBeNull();
  });
});
