#!/usr/bin/env node
// The `solc` forge runs (foundry.toml: `solc = "scripts/solc-forge.mjs"`, `offline = true`): forge
// cannot download a native compiler here, so this answers forge's two questions with the `solc`
// npm package (the same compiler `npm run contracts:compile` uses): `--version`, and
// `--standard-json` (input on stdin, output on stdout). Other flags forge adds (--allow-paths,
// --base-path, --include-path) only matter for reading imports, which forge inlines into the input;
// an import it did not inline is read from disk relative to the project root, then node_modules.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(import.meta.url);
const solc = require('solc');
const args = process.argv.slice(2);

if (args.includes('--version')) {
  // forge reads the version from the last line, as the native compiler prints it.
  const version = solc.version().replace('.Emscripten.clang', '');
  process.stdout.write(`solc, the solidity compiler commandline interface\nVersion: ${version}.Linux.g++\n`);
  process.exit(0);
}
if (!args.includes('--standard-json')) {
  process.stderr.write(`solc-forge: only --version and --standard-json are supported (got: ${args.join(' ')})\n`);
  process.exit(1);
}

function findImports(importPath) {
  for (const candidate of [path.resolve(root, importPath), path.resolve(root, 'node_modules', importPath)]) {
    try {
      return { contents: readFileSync(candidate, 'utf8') };
    } catch {
      // try the next place
    }
  }
  return { error: `solc-forge: cannot read ${importPath}` };
}

const input = readFileSync(0, 'utf8');
process.stdout.write(solc.compile(input, { import: findImports }));
