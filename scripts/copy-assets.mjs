// Second step of `npm run build`: the files the compiled code reads at run time (templates/,
// SQL migrations and any other non-TypeScript file under src/ and jobs/) copied into dist/ at the
// same relative place, and the bin made executable.
import { chmodSync, cpSync, existsSync } from 'node:fs';
import path from 'node:path';

const root = path.resolve(import.meta.dirname ?? path.dirname(new URL(import.meta.url).pathname), '..');
const dist = path.join(root, 'dist');
const notTypeScript = (src) => !/\.[cm]?ts$/.test(src);

cpSync(path.join(root, 'templates'), path.join(dist, 'templates'), { recursive: true });
for (const dir of ['src', 'jobs']) {
  cpSync(path.join(root, dir), path.join(dist, dir), { recursive: true, filter: notTypeScript });
}
const bin = path.join(dist, 'src', 'cli.js');
if (!existsSync(bin)) throw new Error(`build: ${bin} is missing`);
chmodSync(bin, 0o755);
