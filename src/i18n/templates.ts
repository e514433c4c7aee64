// The documents' one Handlebars set-up (emails, the payment page, the phrases of every language):
// the templates/ folder, one Handlebars instance of their own with the phrase helper `t`
// (registered by messages.ts), and strict compilation, so a misspelt variable throws instead of
// rendering as empty.
import { readFileSync } from 'node:fs';
import Handlebars from 'handlebars';

// Relative to this module, not the cwd, so workers, tests and scripts find the same files.
const TEMPLATES_DIR = new URL('../../templates/', import.meta.url);

/** A file of templates/ (`layout.html.hbs`, `locales/en.json`, `pay-page.css`). */
export function readTemplate(file: string): string {
  return readFileSync(new URL(file, TEMPLATES_DIR), 'utf8');
}

/** An isolated instance: helpers and partials registered here cannot clash with any other Handlebars use. */
export const documentTemplates = Handlebars.create();

/** Compiles a template in strict mode; `noEscape` for output that is not HTML (a subject, a text body, a phrase). */
export function compileTemplate<V>(source: string, opts: { noEscape?: boolean } = {}): Handlebars.TemplateDelegate<V> {
  return documentTemplates.compile<V>(source, { strict: true, noEscape: opts.noEscape ?? false });
}
