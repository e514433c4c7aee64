// `npm run docs:generate`: writes the generated parts of the docs (scripts/docs-generation.ts).
// `--check` writes nothing and exits 1 naming each stale file.
import { readFileSync, writeFileSync } from 'node:fs';
import { ROOT, generatedFiles } from './docs-generation.js';

const check = process.argv.includes('--check');
const stale: string[] = [];
for (const { path, content } of generatedFiles()) {
  if (readFileSync(ROOT + path, 'utf8') === content) continue;
  stale.push(path);
  if (!check) writeFileSync(ROOT + path, content);
}
if (check && stale.length > 0) {
  process.stderr.write(`stale generated docs: ${stale.join(', ')} (run npm run docs:generate)\n`);
  process.exit(1);
}
process.stdout.write(stale.length === 0 ? 'generated docs are current\n' : `wrote ${stale.join(', ')}\n`);
