// The docs a newcomer reads: the generated parts are what `npm run docs:generate` writes from their
// sources, and every relative link (and its #anchor) between them resolves.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT, generatedFiles } from '../../scripts/docs-generation.js';

const DOCS = ['README.md', 'CONTRIBUTING.md', 'ARCHITECTURE.md', ...readdirSync(join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];

/** GitHub's heading anchors: lower case, punctuation dropped, spaces to dashes, repeats numbered. */
function anchorsOf(markdown: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  let fenced = false;
  for (const line of markdown.split('\n')) {
    if (line.startsWith('```')) fenced = !fenced;
    if (fenced) continue;
    for (const m of line.matchAll(/<a id="([^"]+)"/g)) anchors.add(m[1]);
    const h = /^#{1,6} (.+)$/.exec(line);
    if (!h) continue;
    const base = h[1]
      .trim()
      .toLowerCase()
      .replace(/[^\p{L}\p{N} _-]/gu, '')
      .replace(/ /g, '-');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    anchors.add(n === 0 ? base : `${base}-${n}`);
  }
  return anchors;
}

/** Relative link targets of a Markdown file, outside code blocks and code spans. */
function linksOf(markdown: string): string[] {
  const prose = markdown.replace(/^```[\s\S]*?^```/gm, '').replace(/`[^`\n]*`/g, '');
  return [...prose.matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1]).filter((t) => !/^[a-z][a-z0-9+.-]*:/i.test(t));
}

describe('generated docs', () => {
  it.each(generatedFiles().map((f) => [f.path, f.content] as const))('%s is current (npm run docs:generate)', (path, content) => {
    expect(readFileSync(join(ROOT, path), 'utf8') === content, `${path} is stale: run npm run docs:generate and commit it`).toBe(true);
  });
});

describe('links between the docs', () => {
  it.each(DOCS)('every relative link of %s resolves', (doc) => {
    const text = readFileSync(join(ROOT, doc), 'utf8');
    const broken: string[] = [];
    for (const target of linksOf(text)) {
      const [file, anchor] = target.split('#') as [string, string | undefined];
      const path = file === '' ? join(ROOT, doc) : normalize(join(ROOT, dirname(doc), file));
      if (relative(ROOT, path).startsWith('..') || !existsSync(path)) {
        broken.push(`${target} (no such file)`);
        continue;
      }
      if (anchor === undefined || statSync(path).isDirectory()) continue;
      if (!anchorsOf(readFileSync(path, 'utf8')).has(anchor)) broken.push(`${target} (no such heading)`);
    }
    expect(broken).toEqual([]);
  });

  it('finds the links it checks (a link in a code span is no link)', () => {
    expect(linksOf('see [a](docs/a.md#x) and `[b](c.md)`, [web](https://example.com)')).toEqual(['docs/a.md#x']);
    expect([...anchorsOf('# Safe retries: `Idempotency-Key`\n## Lists\n## Lists\n')]).toEqual(['safe-retries-idempotency-key', 'lists', 'lists-1']);
  });
});
