// The generated parts of the docs, as pure functions of their sources: the errors table of
// docs/api.md from src/errors.ts. `npm run docs:generate` writes them (scripts/generate-docs.ts);
// test/unit/docs.test.ts fails when a committed file differs from what this produces.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { ERROR_WHEN, errorCatalogue } from '../src/errors.js';

export const ROOT = fileURLToPath(new URL('../', import.meta.url));

export interface GeneratedFile {
  /** Relative to the repository root. */
  path: string;
  content: string;
}

const cell = (text: string): string => text.replace(/\|/g, '\\|');

export function errorsTable(): string {
  const rows = errorCatalogue().map(({ code, status }) => `| \`${code}\` | ${status} | ${cell(ERROR_WHEN[code])} |`);
  return ['| Code | Status | When |', '|---|---|---|', ...rows].join('\n');
}

/**
 * Replaces what lies between `<!-- BEGIN GENERATED: name ... -->` and `<!-- END GENERATED: name -->`;
 * the markers stay, so the hand-written text around them is kept.
 */
export function replaceSection(text: string, name: string, body: string): string {
  const begin = new RegExp(`<!-- BEGIN GENERATED: ${name}\\b[^>]*-->\\n`);
  const end = `<!-- END GENERATED: ${name} -->`;
  const b = begin.exec(text);
  const e = text.indexOf(end);
  if (!b || e < b.index) throw new Error(`markers of the generated section "${name}" not found`);
  const start = b.index + b[0].length;
  return `${text.slice(0, start)}${body}\n${text.slice(e)}`;
}

/** Every generated file, as it should be committed, given the current text of each (`read`). */
export function generatedFiles(read: (path: string) => string = (p) => readFileSync(ROOT + p, 'utf8')): GeneratedFile[] {
  return [{ path: 'docs/api.md', content: replaceSection(read('docs/api.md'), 'errors', errorsTable()) }];
}
