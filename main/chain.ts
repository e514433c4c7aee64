// `npm run chain`: a real local chain for development and demos. anvil on 127.0.0.1:8545
// (CHAIN_PORT), chain id 31337, a block a second, its state kept in var/chain/ (CHAIN_STATE_DIR);
import { createServer } from 'node:net';
// the fee proxy, the test USDC and the SubscriptionManager deployed and payers funded on the first
// run only (later runs find them on the kept chain); var/chain/chains.json and the relayer's key
// (var/chain/relayer.key, mode 600, its account given gas) written; one block printed. SIGINT/SIGTERM
// stop anvil (which writes its state) and exit 0. `-- --fresh` deletes the state and starts over.
import { existsSync } from 'node:fs';
import { mkdir, rm } from 'node:fs/promises';
import { createPublicClient, formatUnits, http } from 'viem';
import { DEPLOYER_INDEX, FEE_ACCOUNT_INDEX, MERCHANT_ACCOUNT_INDEX, WELL_KNOWN_ACCOUNTS } from '../src/devchain/accounts.js';
import { AnvilError, startAnvil, type AnvilProcess } from '../src/devchain/anvil.js';
import { LOCAL_CHAIN_ID } from '../src/domain/chains.js';
import {
  CHAIN_BLOCK_TIME_SECONDS,
  ChainCommandError,
  chainCommandOptions,
  chainReadyMessage,
  type ChainCommandOptions,
} from '../src/devchain/chain-command.js';
import { localChainsFileEntry, readLocalContracts, writeChainsFile } from '../src/devchain/chains-file.js';
import { TEST_USDC_ABI } from '../src/devchain/contracts.js';
import { deployDevContracts, deploySubscriptionManager, hasCode, hasDevContracts, type DevChainContracts } from '../src/devchain/deploy.js';
import { prepareLocalRelayer } from '../src/devchain/relayer-key.js';

/** Said when the port is taken, whether found before anvil starts or by anvil itself. */
const portTakenMessage = (port: number) =>
  `port ${port} is already in use, most likely by a chain already running (another npm run chain): ` +
  `use that one, stop it (Ctrl-C in its terminal), or start this one on another port with CHAIN_PORT=<port>`;

/** True when something listens on 127.0.0.1:port (anvil's own check comes too late: the node answering is the other one). */
function portInUse(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once('error', (err: NodeJS.ErrnoException) => resolve(err.code === 'EADDRINUSE'));
    probe.listen(port, '127.0.0.1', () => probe.close(() => resolve(false)));
  });
}

function fail(message: string): never {
  process.stderr.write(`npm run chain: ${message}\n`);
  process.exit(1);
}

let opts: ChainCommandOptions;
try {
  opts = chainCommandOptions(process.env, process.argv.slice(2));
} catch (err) {
  if (err instanceof ChainCommandError) fail(err.message);
  throw err;
}

let anvil: Promise<AnvilProcess> | null = null;
let stopping = false;
// Installed before anvil starts: a Ctrl-C during the deploy still stops it and saves the state.
const onSignal = (signal: NodeJS.Signals) => {
  if (stopping) return; // a terminal's Ctrl-C and npm's forwarding can both deliver it
  stopping = true;
  process.stdout.write(`\n${signal}: stopping the chain\n`);
  // An anvil still starting is stopped once it answers (or has failed to start).
  const stopped = anvil ? anvil.then((a) => a.stop(), () => undefined) : Promise.resolve();
  stopped.then(
    () => {
      process.stdout.write(`stopped; its state is in ${opts.statePath}\n`);
      process.exit(0);
    },
    (err: unknown) => fail(`could not stop anvil: ${(err as Error).message}`),
  );
};
process.on('SIGINT', onSignal);
process.on('SIGTERM', onSignal);

if (opts.fresh) {
  await rm(opts.statePath, { force: true });
  await rm(opts.chainsFile, { force: true });
}

if (opts.port !== 0 && (await portInUse(opts.port))) fail(portTakenMessage(opts.port));

const hadState = existsSync(opts.statePath);
// anvil writes its state on exit only into a folder that exists.
await mkdir(opts.stateDir, { recursive: true });
anvil = startAnvil({
  port: opts.port,
  chainId: LOCAL_CHAIN_ID,
  blockTime: CHAIN_BLOCK_TIME_SECONDS,
  statePath: opts.statePath,
  // Only this process signals anvil: one clean stop, one state dump, whatever the terminal sends.
  ownProcessGroup: true,
});
let running: AnvilProcess;
try {
  running = await anvil;
} catch (err) {
  if (!(err instanceof AnvilError)) throw err;
  const output = err.message;
  if (/address already in use/i.test(output)) fail(portTakenMessage(opts.port));
  if (hadState) fail(`${err.message}\n(the state in ${opts.statePath} may be damaged: npm run chain -- --fresh starts over)`);
  fail(err.message);
}
// A watcher, not a step: `exited` never rejects, and fail() ends the process.
void running.exited.then(({ code, signal }) => {
  if (stopping) return;
  if (/address already in use/i.test(running.outputTail())) fail(portTakenMessage(opts.port));
  fail(`anvil exited on its own (code ${code}, signal ${signal}):\n${running.outputTail()}`);
});

// A failure once anvil runs (a deploy that reverts) stops it and exits 1; a signal meanwhile makes
// the RPC calls fail too, and then onSignal's clean exit is the one that counts.
await ready(running).catch(async (err: unknown) => {
  if (stopping) return;
  stopping = true;
  await running.stop();
  fail(`could not prepare the chain: ${(err as Error).message}`);
});

async function ready(running: AnvilProcess): Promise<void> {
  const previous = readLocalContracts(opts.chainsFile);
  const kept = previous !== null && (await hasDevContracts(running.rpcUrl, previous));
  let contracts: DevChainContracts;
  if (kept) {
    // A chain kept from before the SubscriptionManager existed (or whose file lost it) gets one now.
    const manager = previous.subscriptionManager;
    const subscriptionManager =
      manager !== null && (await hasCode(running.rpcUrl, [manager]))
        ? manager
        : (await deploySubscriptionManager(running.rpcUrl, WELL_KNOWN_ACCOUNTS[DEPLOYER_INDEX].address)).address;
    contracts = { ...previous, subscriptionManager };
  } else {
    contracts = await deployDevContracts(running.rpcUrl);
  }
  const feeAddress = WELL_KNOWN_ACCOUNTS[FEE_ACCOUNT_INDEX].address;
  writeChainsFile(opts.chainsFile, [localChainsFileEntry({ rpcUrl: running.rpcUrl, chainId: running.chainId, ...contracts, feeAddress })]);
  // The service's relayer on this chain: its key beside the chains file, and gas.
  const relayer = await prepareLocalRelayer(running.rpcUrl, opts.chainsFile);

  const client = createPublicClient({ transport: http(running.rpcUrl) });
  const payer = WELL_KNOWN_ACCOUNTS[DEPLOYER_INDEX];
  const [blockNumber, payerBalance] = await Promise.all([
    client.getBlockNumber(),
    client.readContract({ address: contracts.token, abi: TEST_USDC_ABI, functionName: 'balanceOf', args: [payer.address] }),
  ]);
  if (!stopping) {
    process.stdout.write(
      `${chainReadyMessage({
        rpcUrl: running.rpcUrl,
        chainId: running.chainId,
        chainsFile: opts.chainsFile,
        stateDir: opts.stateDir,
        contracts: kept ? 'kept' : 'deployed',
        blockNumber,
        ...contracts,
        feeAddress,
        relayer,
        merchant: WELL_KNOWN_ACCOUNTS[MERCHANT_ACCOUNT_INDEX].address,
        payer,
        payerBalance: formatUnits(payerBalance, contracts.tokenDecimals),
      })}\n`,
    );
  }
}
