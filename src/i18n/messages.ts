// The phrases of every customer-facing document (emails, PDFs, receipts, the payment page), one
// catalogue per language in templates/locales/<language>.json. Each phrase is a small Handlebars
// template over plain values; the caller escapes the result for its medium (the HTML templates
// escape it, the PDF draws it as text). A phrase a catalogue lacks comes from English.
import type Handlebars from 'handlebars';
import { SUPPORTED_LANGUAGES, templateLanguage, type Language } from '../domain/locale.js';
import { compileTemplate, documentTemplates, readTemplate } from './templates.js';

type Phrase = Handlebars.TemplateDelegate<Record<string, unknown>>;

const catalogues = new Map<Language, Map<string, Phrase>>();
const rawCatalogues = new Map<Language, Map<string, string>>();

function catalogue(language: Language): Map<string, Phrase> {
  let phrases = catalogues.get(language);
  if (!phrases) {
    const raw = JSON.parse(readTemplate(`locales/${language}.json`)) as Record<string, unknown>;
    phrases = new Map();
    const texts = new Map<string, string>();
    for (const [key, text] of Object.entries(raw)) {
      if (typeof text !== 'string') throw new Error(`templates/locales/${language}.json: "${key}" is not a string`);
      texts.set(key, text);
      // noEscape: see header.
      phrases.set(key, compileTemplate(text, { noEscape: true }));
    }
    catalogues.set(language, phrases);
    rawCatalogues.set(language, texts);
  }
  return phrases;
}

function rawCatalogue(language: Language): Map<string, string> {
  catalogue(language);
  return rawCatalogues.get(language)!;
}

export interface Messages {
  /** The locale the caller asked for (a BCP 47 tag; Intl formats dates and numbers with it). */
  locale: string;
  /** The catalogue's language. */
  language: Language;
  /** The phrase `key`, filled with `values`; English when this language lacks it. */
  t(key: string, values?: Record<string, unknown>): string;
  /** The phrase `key` unfilled, its `{{placeholders}}` as written (for the page's script to fill). */
  raw(key: string): string;
}

export function messagesFor(locale: string | null | undefined): Messages {
  const language = templateLanguage(locale);
  const own = catalogue(language);
  const fallback = catalogue('en');
  return {
    locale: locale ?? 'en',
    language,
    t(key, values = {}) {
      const phrase = own.get(key) ?? fallback.get(key);
      if (!phrase) throw new Error(`no phrase "${key}" in any catalogue`);
      return phrase(values);
    },
    raw(key) {
      const text = rawCatalogue(language).get(key) ?? rawCatalogue('en').get(key);
      if (text === undefined) throw new Error(`no phrase "${key}" in any catalogue`);
      return text;
    },
  };
}

/** Loads every catalogue now, so a broken file fails at start; returns the keys each lacks. */
export function loadCatalogues(): Record<Language, string[]> {
  const english = [...catalogue('en').keys()];
  const missing = {} as Record<Language, string[]>;
  for (const language of SUPPORTED_LANGUAGES) {
    const own = catalogue(language);
    missing[language] = english.filter((k) => !own.has(k));
  }
  return missing;
}

/** Where a Handlebars view carries its Messages for the `t` helper. */
export const MESSAGES = Symbol('messages');
export type WithMessages = { [MESSAGES]?: Messages };

/**
 * `{{t "key" name=value}}` in every document template: the phrase in the view's language (the
 * Messages under MESSAGES on the root view), filled from the view and the hash. In HTML output the
 * phrase is escaped like any value.
 */
documentTemplates.registerHelper('t', function (this: unknown, key: unknown, options: Handlebars.HelperOptions) {
  const root = options.data.root as Record<string, unknown> & WithMessages;
  const messages = root[MESSAGES] ?? messagesFor('en');
  return messages.t(String(key), { ...root, ...options.hash });
});
