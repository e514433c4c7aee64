// `npm run build`: a clean dist/ with the compiled service (tsconfig.build.json: main/, src/, jobs/,
// laid out as in the repository), then the files the compiled code reads at run time (templates/,
// SQL migrations and any other non-TypeScript file under main/, src/ and jobs/) at the same relative
// place, the payment page's wallet script bundled by esbuild (viem included) into one hashed file
// beside the compiled module that serves it, and the bin made executable. Starting clean matters:
// a stale migration left in dist/ would be applied by `migrate`.
// `node scripts/build.mjs <dir>` (or `npm run build -- <dir>`) writes the same into <dir> instead:
// the tests build into a temporary folder and leave the working tree's dist/ alone.
import { execFileSync } from 'node:child_process';
import { chmodSync, cpSync, existsSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const dist = process.argv[2] ? path.resolve(process.argv[2]) : path.join(root, 'dist');
// The folder is emptied first: never the repository or a folder holding it.
if (dist === root || path.relative(dist, root).split(path.sep)[0] !== '..') throw new Error(`build: refusing to empty ${dist}, which holds the repository`);
const notTypeScript = (src) => !/\.[cm]?ts$/.test(src);

rmSync(dist, { recursive: true, force: true });
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
execFileSync(process.execPath, [tsc, '-p', path.join(root, 'tsconfig.build.json'), '--outDir', dist], { stdio: 'inherit' });
cpSync(path.join(root, 'templates'), path.join(dist, 'templates'), { recursive: true });
for (const dir of ['main', 'src', 'jobs']) {
  cpSync(path.join(root, dir), path.join(dist, dir), { recursive: true, filter: notTypeScript });
}
// The same bundling as a run from source does in memory (src/page/wallet-script.ts).
const { writeWalletScript } = await import(pathToFileURL(path.join(dist, 'src', 'page', 'wallet-script.js')).href);
await writeWalletScript(path.join(root, 'src', 'page', 'wallet', 'pay.ts'), path.join(dist, 'src', 'page', 'wallet'));
const bin = path.join(dist, 'main', 'cli.js');
if (!existsSync(bin)) throw new Error(`build: ${bin} is missing`);
chmodSync(bin, 0o755);
