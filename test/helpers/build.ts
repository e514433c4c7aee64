// The production build (scripts/build.mjs, what `npm run build` and the Dockerfile run) written to
// a temporary folder, so a test never replaces the working tree's dist/ under a developer's feet
// (or under a `node dist/main/cli.js` they are running). The folder is laid out like dist/, with
// the repository's package.json ("type": "module") and a link to its node_modules beside the
// code, as the image has them beside dist/.
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ROOT } from './worker.js';

export interface ServiceBuild {
  /** The folder holding main/, src/, jobs/ and templates/ compiled, as dist/ would. */
  dir: string;
  /** Its compiled CLI, `<dir>/main/cli.js` (package.json's bin in dist/). */
  cli: string;
  remove(): void;
}

export function buildService(): ServiceBuild {
  const root = mkdtempSync(path.join(tmpdir(), 'invoice-build-'));
  const dir = path.join(root, 'dist');
  // Beside the code before the build: the build imports its own compiled wallet-script module,
  // which needs esbuild from node_modules.
  copyFileSync(path.join(ROOT, 'package.json'), path.join(root, 'package.json'));
  symlinkSync(path.join(ROOT, 'node_modules'), path.join(root, 'node_modules'), 'dir');
  const build = spawnSync(process.execPath, [path.join(ROOT, 'scripts/build.mjs'), dir], { cwd: ROOT, encoding: 'utf8', timeout: 180_000 });
  if (build.status !== 0) {
    rmSync(root, { recursive: true, force: true });
    throw new Error(`scripts/build.mjs ${dir} failed (status ${build.status}):\n${build.stdout}\n${build.stderr}`);
  }
  return { dir, cli: path.join(dir, 'main', 'cli.js'), remove: () => rmSync(root, { recursive: true, force: true }) };
}
