// `npm run contracts:deploy -- --rpc <url> --key-file <path>`: deploys the SubscriptionManager
// (contracts/artifacts/SubscriptionManager.json) from the key in the file on the chain at the RPC
// URL, waits for it to be mined, and prints its address and the line for CHAINS_FILE, exit 0.
// Refuses with one line on stderr and exit 1 (bad arguments, a key file others may read, a node
// that does not answer, a deployment that reverts). The key is never printed.
import { firstLine } from '../src/lib/first-line.js';
import { createPublicClient, http } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import {
  ContractsDeployError,
  contractsDeployOptions,
  deployedMessage,
  readDeployKey,
  type ContractsDeployOptions,
} from '../src/devchain/contracts-deploy-command.js';
import { deploySubscriptionManager } from '../src/devchain/deploy.js';

/** A real chain may take minutes to mine a transaction. */
const RECEIPT_TIMEOUT_MS = 10 * 60_000;

function fail(message: string): never {
  process.stderr.write(`npm run contracts:deploy: ${message}\n`);
  process.exit(1);
}

let opts: ContractsDeployOptions;
let key: `0x${string}`;
try {
  opts = contractsDeployOptions(process.argv.slice(2));
  key = readDeployKey(opts.keyFile);
} catch (err) {
  if (err instanceof ContractsDeployError) fail(err.message);
  throw err;
}

const account = privateKeyToAccount(key);
try {
  const chainId = await createPublicClient({ transport: http(opts.rpcUrl) }).getChainId();
  const deployed = await deploySubscriptionManager(opts.rpcUrl, account, RECEIPT_TIMEOUT_MS);
  process.stdout.write(`${deployedMessage({ chainId, ...deployed, address: deployed.address, deployer: account.address }).join('\n')}\n`);
} catch (err) {
  fail(`deploying through --rpc failed: ${firstLine(err)}`);
}
