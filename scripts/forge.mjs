// Runs forge (from the @foundry-rs/forge npm package's platform binary) with the given arguments
// and exits with forge's own exit code. The package's `forge` bin wrapper cannot be used for tests:
// it exits 0 even when forge fails (1.7.1 forgets to pass the child's exit code on), so a failing
// test would pass CI. `npm run contracts:test` = `node scripts/forge.mjs test`.
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(import.meta.url);
const arch = { x64: 'amd64', arm64: 'arm64' }[process.arch];
const binary = process.platform === 'win32' ? 'forge.exe' : 'forge';
let forge;
try {
  forge = require.resolve(`@foundry-rs/forge-${process.platform}-${arch}/bin/${binary}`);
} catch {
  console.error(`forge: no @foundry-rs/forge binary for ${process.platform}-${process.arch} in node_modules (npm ci installs it)`);
  process.exit(1);
}
const result = spawnSync(forge, process.argv.slice(2), { cwd: root, stdio: 'inherit' });
if (result.error) {
  console.error(`forge: ${result.error.message}`);
  process.exit(1);
}
process.exit(result.status ?? 1);
