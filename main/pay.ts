// `npm run pay -- <payment reference | invoice reference | payment page URL | invoice id> [amount]
// [--transfer] [--key <private key>]`: pays an invoice on the local chain of `npm run chain`
// from a funded test account (anvil's account 0 unless --key), through the fee proxy (approve
// when short, then transferFromWithReferenceAndFee) or by plain transfer; prints the transaction
// and its block, exit 0. Refuses with one line on stderr and exit 1 (unknown invoice, draft, paid,
// void, no instructions, a chain that is not local, a bad amount). The database is the one the
// other commands use: DATABASE_URL, else the embedded PostgreSQL of `npm start`.
import { firstLine } from '../src/lib/first-line.js';
import { useLocalChainsFile } from '../src/chains-config.js';
import { loadConfigOrExit } from '../src/config.js';
import { findInvoiceByAnyReference, type InvoiceRow } from '../src/db/invoices.js';
import { createPool } from '../src/db/pool.js';
import {
  PayCommandError,
  paidMessage,
  payCommandOptions,
  planPayment,
  sendPayment,
  type InvoiceToPay,
  type PayCommandOptions,
} from '../src/devchain/pay-command.js';
import { chooseDatabaseOrExit } from '../src/runtime/database.js';

function fail(message: string): never {
  process.stderr.write(`npm run pay: ${message}\n`);
  process.exit(1);
}

let opts: PayCommandOptions;
try {
  opts = payCommandOptions(process.argv.slice(2));
} catch (err) {
  if (err instanceof PayCommandError) fail(err.message);
  throw err;
}

function toPay(r: InvoiceRow): InvoiceToPay {
  return {
    id: r.id,
    code: r.code,
    status: r.status,
    currency: r.currency,
    chainId: r.chain_id,
    network: r.network,
    tokenAddress: r.token_address,
    tokenDecimals: r.token_decimals,
    amountAtomic: r.amount_atomic === null ? null : BigInt(r.amount_atomic),
    paidAtomic: BigInt(r.amount_paid_atomic ?? '0'),
    feeAtomic: BigInt(r.fee_atomic ?? '0'),
    feeCountedAtomic: r.fee_counted_atomic === null ? null : BigInt(r.fee_counted_atomic),
    feeBps: r.fee_bps,
    settlementAddress: r.settlement_address,
    paymentReference: r.payment_reference,
  };
}

// Quiet: what this command prints is the payment (or one line saying why not).
const chains = useLocalChainsFile({ LOG_LEVEL: 'warn', ...process.env });
const database = await chooseDatabaseOrExit(chains.env, 'share');
const config = loadConfigOrExit(database.env);
const pool = createPool(config.databaseUrl, 1);
let code = 0;
try {
  const row = await findInvoiceByAnyReference(pool, opts.handle).catch((err: unknown) => {
    throw new PayCommandError(`could not read the invoices (${firstLine(err)}): is the database migrated (npm start or npm run migrate)?`);
  });
  if (row === null) throw new PayCommandError(`no invoice has the payment reference, reference or id "${opts.handle.slice(0, 80)}"`);
  const invoice = toPay(row);
  const chain = config.chains.find((c) => c.chainId === invoice.chainId);
  const plan = planPayment(invoice, chain, opts);
  const sent = await sendPayment(plan, opts.privateKey);
  process.stdout.write(`${paidMessage(invoice, plan, sent, chain?.confirmations ?? null).join('\n')}\n`);
} catch (err) {
  code = 1;
  process.stderr.write(`npm run pay: ${err instanceof PayCommandError ? err.message : firstLine(err)}\n`);
} finally {
  await pool.end();
  await database.stop();
}
process.exit(code);
