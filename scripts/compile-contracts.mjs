// `npm run contracts:compile`: compiles contracts/TestUSDC.sol and contracts/SubscriptionManager.sol
// with the `solc` npm package (no native compiler) and writes contracts/artifacts/<Name>.json
// ({contractName, abi, bytecode}).
// The artifact is committed, so `npm ci` needs no compiler run; test/unit/contracts-artifact.test.ts
// compiles again and fails when the committed file is stale.
// `--check` compiles and compares without writing (exit 1 when the artifact differs).
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(import.meta.url);
const solc = require('solc');

/** The contracts compiled: source file under contracts/ and contract name. */
const CONTRACTS = [
  { file: 'TestUSDC.sol', name: 'TestUSDC' },
  { file: 'SubscriptionManager.sol', name: 'SubscriptionManager' },
];

/**
 * Pinned settings: the artifact must be the same bytes on every machine and every run, so nothing
 * is left to the compiler's defaults (which change between solc releases).
 */
const SETTINGS = {
  optimizer: { enabled: true, runs: 200 },
  evmVersion: 'cancun',
  outputSelection: { '*': { '*': ['abi', 'evm.bytecode.object'] } },
};

/** Resolves `@openzeppelin/...` (and any other package import) from node_modules. */
function findImports(importPath) {
  try {
    return { contents: readFileSync(require.resolve(importPath), 'utf8') };
  } catch (err) {
    return { error: `cannot resolve ${importPath}: ${err.message}` };
  }
}

/** Compiles every contract; returns a map from artifact path to its JSON text. */
export function compileContracts() {
  const sources = {};
  for (const { file } of CONTRACTS) sources[file] = { content: readFileSync(path.join(root, 'contracts', file), 'utf8') };
  const input = { language: 'Solidity', sources, settings: SETTINGS };
  const output = JSON.parse(solc.compile(JSON.stringify(input), { import: findImports }));
  const errors = (output.errors ?? []).filter((e) => e.severity === 'error');
  if (errors.length > 0) throw new Error(`solc ${solc.version()}:\n${errors.map((e) => e.formattedMessage).join('\n')}`);
  const artifacts = new Map();
  for (const { file, name } of CONTRACTS) {
    const contract = output.contracts[file][name];
    const artifact = {
      contractName: name,
      compiler: `solc ${solc.version()}`,
      abi: contract.abi,
      bytecode: `0x${contract.evm.bytecode.object}`,
    };
    artifacts.set(path.join(root, 'contracts', 'artifacts', `${name}.json`), `${JSON.stringify(artifact, null, 2)}\n`);
  }
  return artifacts;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const check = process.argv.includes('--check');
  let stale = 0;
  for (const [file, text] of compileContracts()) {
    const rel = path.relative(root, file);
    if (check) {
      let current = null;
      try {
        current = readFileSync(file, 'utf8');
      } catch {
        // missing counts as stale
      }
      if (current !== text) {
        stale += 1;
        console.error(`${rel} is stale: run npm run contracts:compile`);
      }
    } else {
      writeFileSync(file, text);
      console.log(`wrote ${rel}`);
    }
  }
  if (stale > 0) process.exit(1);
}
