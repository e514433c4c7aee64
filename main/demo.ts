// `invoice-lifecycle demo` (`npm run demo`): idempotently sets up a demo merchant with data to try every endpoint, and
// prints one JSON object (keys and ids) as the last line of stdout.
//
// Re-running keeps the same merchant, keys, products and links, and creates a new
// draft invoice only when the previous one was already sent.
//
// With a local chain (`npm run chain` wrote var/chain/chains.json, or CHAINS_FILE names a chain of
// network `local`): the sandbox settlement address is anvil's account 8 (never a payer), and the
// demo invoice is made on that chain in USDC and sent, so it has payment instructions; the lines
// before the JSON say how to pay it (`npm run pay -- <payment reference>`).
import { useLocalChainsFile } from '../src/chains-config.js';
import { loadConfigOrExit } from '../src/config.js';
import { setSettlementAddress } from '../src/db/accounts.js';
import { countLiveKeys, findDemoObjects, linkHasPayments, revokeKeysNamed } from '../src/db/demo-fixtures.js';
import { migrate } from '../src/db/migrate.js';
import type { Pool } from '../src/db/pool.js';
import { createLogger, prettyLogs } from '../src/log.js';
import { createApiRuntime } from '../src/runtime/api-runtime.js';
import { chooseDatabaseOrExit } from '../src/runtime/database.js';
import { startOrExit } from '../src/runtime/startup-error.js';
import { provisionMerchant, type MerchantKeys } from '../src/runtime/provision.js';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { hashApiKey } from '../src/domain/api-keys.js';
import { MERCHANT_ACCOUNT_INDEX, WELL_KNOWN_ACCOUNTS } from '../src/devchain/accounts.js';

const DEMO_ACCOUNT = 'acct_demo';
const DEMO_SETTLEMENT_ADDRESS = '0xDe30000000000000000000000000000000000001';

// Quiet by default: the last line of stdout is the JSON a newcomer copies from.
const chains = useLocalChainsFile({ LOG_LEVEL: 'warn', ...process.env });
const database = await chooseDatabaseOrExit(chains.env, 'share');
const config = loadConfigOrExit(database.env);
const KEYS_FILE = config.demoKeysFile;
const log = createLogger(config.logLevel, undefined, { pretty: prettyLogs(config.logFormat) });
if (chains.found !== null) log.info({ chains_file: chains.found }, 'chains file found');
// The local chain (network `local`) with a token to invoice in: the demo's invoice is paid there.
const localChain = config.chains.find((c) => c.network === 'local' && c.environment === 'sandbox' && c.tokens.some((t) => t.currency === 'USDC'));
const LOCAL_MERCHANT = WELL_KNOWN_ACCOUNTS[MERCHANT_ACCOUNT_INDEX].address;
await migrate(config.databaseUrl, undefined, { queueSchema: config.queueBackend === 'postgres' });
const api = await startOrExit(() => createApiRuntime(config, log));

async function call<T>(key: string, method: 'GET' | 'POST' | 'PATCH', url: string, payload?: object): Promise<T> {
  const res = await api.app.inject({ method, url, headers: { 'api-key': key }, ...(payload ? { payload } : {}) });
  if (res.statusCode !== 200) throw new Error(`${method} ${url} -> ${res.statusCode} ${res.body}`);
  return (res.json() as { data: T }).data;
}

/**
 * The demo keys of an earlier run, when they still authenticate against this database: secrets
 * are stored hashed, so the demo keeps its own (local, throwaway) copy to print them again.
 */
async function previousKeys(pool: Pool): Promise<MerchantKeys | null> {
  let saved: MerchantKeys;
  try {
    saved = JSON.parse(await readFile(KEYS_FILE, 'utf8')) as MerchantKeys;
  } catch {
    return null;
  }
  const all = [saved.sandbox, saved.live, saved.sandbox_read_only, saved.live_read_only];
  if (!all.every((k) => typeof k === 'string')) return null;
  return (await countLiveKeys(pool, DEMO_ACCOUNT, all.map(hashApiKey))) === all.length ? saved : null;
}

try {
  let keys = await previousKeys(api.pool);
  if (!keys) {
    // First run on this database (or its keys were revoked): fresh keys, older demo keys revoked.
    await revokeKeysNamed(api.pool, DEMO_ACCOUNT, 'demo ');
    ({ keys } = await provisionMerchant(
      api.pool,
      {
        id: DEMO_ACCOUNT,
        name: 'Demo Merchant GmbH',
        email: 'billing@demo-merchant.example',
        timeZone: 'Europe/Berlin',
        keyNamePrefix: 'demo ',
        // A made-up address: the sandbox moves no real funds.
        settlementAddress: DEMO_SETTLEMENT_ADDRESS,
      },
      { platformFeeBps: config.platformFeeBps, timeZone: config.reminders.defaultTimeZone },
    ));
    await mkdir(dirname(KEYS_FILE), { recursive: true });
    await writeFile(KEYS_FILE, JSON.stringify(keys), { mode: 0o600 });
  }
  // Also for a demo account made before settlement addresses existed.
  // On a local chain the sandbox is paid for real (test USDC), to an account whose balance shows it.
  // A local chain replaces the made-up address (the demo's own account: nobody else set it).
  if (localChain) await setSettlementAddress(api.pool, { accountId: DEMO_ACCOUNT, environment: 'sandbox' }, LOCAL_MERCHANT);
  else await setSettlementAddress(api.pool, { accountId: DEMO_ACCOUNT, environment: 'sandbox' }, DEMO_SETTLEMENT_ADDRESS, true);
  await setSettlementAddress(api.pool, { accountId: DEMO_ACCOUNT, environment: 'live' }, DEMO_SETTLEMENT_ADDRESS, true);
  const key = keys.sandbox;

  const productId =
    (await findDemoObjects.product(api.pool, DEMO_ACCOUNT)) ??
    (
      await call<{ id: string }>(key, 'POST', '/v1/products', {
        name: 'Pro plan',
        description: 'Monthly subscription to the Pro plan',
        metadata: { demo: 'true' },
        prices: [
          { amount: '49.00', cadence: 'monthly' },
          { amount: '499.00', cadence: 'yearly' },
        ],
      })
    ).id;
  const product = await call<{ prices: { id: string }[] }>(key, 'GET', `/v1/products/${productId}`);
  const priceId = product.prices[0].id;

  const linkId =
    (await findDemoObjects.paymentLinkNamed(api.pool, DEMO_ACCOUNT, 'Demo: Pro plan link')) ??
    (await call<{ id: string }>(key, 'POST', '/v1/payment-links', { name: 'Demo: Pro plan link', price_id: priceId, collect_email: true })).id;
  const customLinkId =
    (await findDemoObjects.paymentLinkNamed(api.pool, DEMO_ACCOUNT, 'Demo: tip jar')) ??
    (await call<{ id: string }>(key, 'POST', '/v1/payment-links', { name: 'Demo: tip jar', min_amount: '1', max_amount: '500', preset_amount: '5' })).id;
  // A link with a payment, to see that it cannot be deleted: the tip jar, a one-time link. The Pro
  // plan's link sells a subscription (its price is monthly), which no simulated payment starts.
  if (!(await linkHasPayments(api.pool, customLinkId))) await call(key, 'POST', `/v1/test_helpers/payment-links/${customLinkId}/payments`, { customer_email: 'payer@example.com' });

  // A plan charged every 30 s from the subscriber's wallet (a sandbox custom interval), and its
  // link: on a local chain `npm run subscribe -- <link id>` subscribes from an anvil account, and
  // the worker charges each period through the relayer (docs/subscriptions.md).
  const subscriptionProductId =
    (await findDemoObjects.subscriptionProduct(api.pool, DEMO_ACCOUNT, localChain ? localChain.network : null)) ??
    (
      await call<{ id: string }>(key, 'POST', '/v1/products', {
        name: 'Demo: 30-second plan',
        description: 'Charged every 30 seconds, to watch periods happen',
        metadata: { demo: 'subscription' },
        prices: [{ amount: '2.00', cadence: 'custom', interval_seconds: 30, ...(localChain ? { network: localChain.network, currency: 'USDC' } : {}) }],
      })
    ).id;
  const subscriptionProduct = await call<{ prices: { id: string }[] }>(key, 'GET', `/v1/products/${subscriptionProductId}`);
  const subscriptionLinkId =
    (await findDemoObjects.paymentLinkNamed(api.pool, DEMO_ACCOUNT, 'Demo: 30-second plan link', localChain ? localChain.network : null)) ??
    (await call<{ id: string }>(key, 'POST', '/v1/payment-links', { name: 'Demo: 30-second plan link', price_id: subscriptionProduct.prices[0].id, collect_email: true })).id;

  const invoiceId =
    (await findDemoObjects.draftInvoice(api.pool, DEMO_ACCOUNT, localChain ? localChain.network : null)) ??
    (
      await call<{ id: string }>(key, 'POST', '/v1/invoices', {
        ...(localChain ? { network: localChain.network, currency: 'USDC' } : {}),
        customer_email: 'jane.doe@example.com',
        customer_name: 'Jane Doe',
        customer_time_zone: 'Europe/Paris',
        due_at: new Date(Date.now() + 7 * 86_400_000).toISOString(),
        memo: 'Thank you for your business.',
        footer: 'Demo Merchant GmbH · Musterstraße 1 · 10115 Berlin',
        tax_id: 'DE123456789',
        metadata: { demo: 'true' },
        line_items: [
          { description: 'Consulting, November', quantity: 10, unit_amount: '120.00' },
          { description: 'Hosting', quantity: 1, unit_amount: '35.50' },
        ],
      })
    ).id;

  // On a local chain the invoice is sent (its email goes where SANDBOX_SMTP_URL says, .eml files by
  // default): sending fixes its settlement address and payment reference.
  let payment: { payment_reference: string; pay_command: string } | null = null;
  if (localChain) {
    const sent = await call<{ code: string; amount: string; currency: string; payment_instructions: { to: string; payment_reference: string } | null }>(
      key,
      'POST',
      `/v1/invoices/${invoiceId}/send`,
    );
    const instructions = sent.payment_instructions;
    if (instructions === null) throw new Error(`invoice ${invoiceId} was sent without payment instructions (chain ${localChain.chainId} has no fee proxy?)`);
    payment = { payment_reference: instructions.payment_reference, pay_command: `npm run pay -- ${instructions.payment_reference}` };
    process.stdout.write(
      [
        `Invoice ${sent.code} sent on the local chain (${localChain.chainId}): ${sent.amount} ${sent.currency} to ${instructions.to} (anvil account ${MERCHANT_ACCOUNT_INDEX}).`,
        `Payment reference ${instructions.payment_reference}. Pay it from anvil account 0:`,
        `  ${payment.pay_command}`,
        `Subscribe to the 30-second plan from anvil account 0 (a receipt in var/outbox every period):`,
        `  npm run subscribe -- ${subscriptionLinkId}`,
        '',
      ].join('\n'),
    );
  }

  const summary = {
    account_id: DEMO_ACCOUNT,
    keys,
    invoice_id: invoiceId,
    ...(payment ?? {}),
    product_id: productId,
    price_id: priceId,
    payment_link_id: linkId,
    custom_payment_link_id: customLinkId,
    subscription_payment_link_id: subscriptionLinkId,
    ...(localChain ? { subscribe_command: `npm run subscribe -- ${subscriptionLinkId}` } : {}),
  };
  process.stdout.write(`${JSON.stringify(summary)}\n`);
} finally {
  await api.close();
  await database.stop();
}
