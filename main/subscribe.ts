// `npm run subscribe -- <payment link id | payment page URL> [--email <address>] [--key <private key>]`:
// subscribes to a recurring price's payment link on the local chain of `npm run chain` from a
// funded test account (anvil's account 0 unless --key), as the link page's "Subscribe with wallet"
// does: the checkout from the running API (`npm start`; a bare link id is looked up at
// PAYMENT_PAGE_BASE), an approve when the allowance is short, then subscribe(terms). Prints the
// transaction hash, exit 0; refuses with one line on stderr and exit 1 (an unknown link, a one-time
// price, an inactive product, a chain without a SubscriptionManager or not local, a short balance).
import { useLocalChainsFile } from '../src/chains-config.js';
import { loadConfigOrExit } from '../src/config.js';
import { firstLine } from '../src/lib/first-line.js';
import {
  linkTarget,
  planSubscription,
  sendSubscription,
  startCheckout,
  SubscribeCommandError,
  subscribeCommandOptions,
  subscribedMessage,
} from '../src/devchain/subscribe-command.js';

function fail(message: string): never {
  process.stderr.write(`npm run subscribe: ${message}\n`);
  process.exit(1);
}

// Quiet: what this command prints is the subscription (or one line saying why not).
const chains = useLocalChainsFile({ LOG_LEVEL: 'warn', ...process.env });
// This command reads no database (the API makes the checkout): the configuration only needs one
// named. Empty is unset, as everywhere in the configuration (`DATABASE_URL=` beside the embedded one).
const config = loadConfigOrExit({ ...chains.env, DATABASE_URL: process.env.DATABASE_URL || 'postgres://unused.invalid/subscribe' });
try {
  const opts = subscribeCommandOptions(process.argv.slice(2));
  const target = linkTarget(opts.handle, config.paymentPageBase);
  const answer = await startCheckout(target, opts.email);
  const chain = config.chains.find((c) => c.chainId === answer.chain_id);
  const plan = planSubscription(answer, chain);
  const sent = await sendSubscription(plan, opts.privateKey);
  process.stdout.write(`${subscribedMessage(target, answer, sent, chain?.confirmations ?? null).join('\n')}\n`);
} catch (err) {
  fail(err instanceof SubscribeCommandError ? err.message : firstLine(err));
}
process.exit(0);
