// No mutable global in the domain (issue 25): each runtime reads the chains of its own
// configuration. Two APIs in one process, one with a CHAINS_FILE adding a chain and one without:
// before, the last one built installed its chains for both ("last caller wins").
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApiFixture, type ApiFixture } from '../helpers/context.js';
import { apiClient } from '../helpers/http.js';

const SETTLEMENT = '0x1111111111111111111111111111111111111111';
const dir = mkdtempSync(path.join(tmpdir(), 'chain-registry-'));
const chainsFile = path.join(dir, 'chains.json');
writeFileSync(
  chainsFile,
  JSON.stringify([
    {
      chain_id: 777002, network: 'privnet', environment: 'sandbox', rpc_urls: [], confirmations: 2, start_block: 0,
      fee_proxy: '0x5FbDB2315678afecb367f032d93F642f64180aa3', fee_address: '0xa0Ee7A142d267C1f36714E4a8F75612F20a79720',
      explorer_url: 'https://explorer.privnet.example.test', tokens: [{ currency: 'USDC', address: '0x9fE46736679d2D9a65F0992F2272dE9f3c7fa6e0', decimals: 6 }],
    },
  ]),
);

let withChain: ApiFixture;
let without: ApiFixture;
beforeAll(async () => {
  // Built in this order, the second would have been the chains both answered with.
  withChain = await startApiFixture({ CHAINS_FILE: chainsFile });
  without = await startApiFixture({});
}, 120_000);
afterAll(async () => {
  await withChain?.close();
  await without?.close();
});

async function invoiceOn(fx: ApiFixture, network: string) {
  const api = apiClient(fx.api.app);
  const key = fx.merchant.keys.sandbox;
  expect((await api.patch('/v1/account', key, { settlement_address: SETTLEMENT })).status).toBe(200);
  const created = await api.post('/v1/invoices', key, { customer_email: 'payer@example.test', amount: '12.5', network, currency: 'USDC' });
  if (created.status !== 200) return created;
  return api.post(`/v1/invoices/${created.body.data.id}/send`, key);
}

describe('each runtime reads its own chains', () => {
  it('the API with the chain issues an invoice on it, with instructions for its proxy; the other refuses the network', async () => {
    const sent = await invoiceOn(withChain, 'privnet');
    expect(sent.status, sent.raw).toBe(200);
    expect(sent.body.data).toMatchObject({ network: 'privnet', chain_id: 777002 });
    expect(sent.body.data.payment_instructions).toMatchObject({ proxy_address: '0x5FbDB2315678afecb367f032d93F642f64180aa3' });

    const refused = await invoiceOn(without, 'privnet');
    expect(refused.status).toBe(400);
    expect(refused.body.error).toMatchObject({ code: 'unknown_network' });

    // And the first still has it after the second answered.
    expect((await invoiceOn(withChain, 'privnet')).status).toBe(200);
  });
});
