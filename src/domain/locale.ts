// Which languages documents (emails, PDFs, receipts, the payment page) can be written in, and how
// a caller's `customer_locale` is read. Pure.

/** Languages with templates; English is the fallback for anything a catalogue lacks. */
export const SUPPORTED_LANGUAGES = ['en', 'de', 'fr', 'es'] as const;
export type Language = (typeof SUPPORTED_LANGUAGES)[number];
export const DEFAULT_LOCALE = 'en';

/**
 * A BCP 47 tag whose language we have templates for, reduced to language and optional region and
 * canonicalised ("de-at" -> "de-AT", "EN" -> "en"); null for anything else (an unknown language,
 * a malformed tag). The region is kept: it shapes dates and numbers through Intl ("de-CH" groups
 * with an apostrophe). Everything else is dropped: a script, variant or extension would reach
 * Intl too, and `-u-nu-hanidec` draws digits the PDF font lacks, `-u-nu-arab` reverses them,
 * `-u-ca-islamic` changes the calendar of every date.
 */
export function parseLocale(input: string): string | null {
  let locale: Intl.Locale;
  try {
    const tags = Intl.getCanonicalLocales(input.replace(/_/g, '-'));
    if (tags.length !== 1) return null;
    locale = new Intl.Locale(tags[0]);
  } catch {
    return null;
  }
  if (!(SUPPORTED_LANGUAGES as readonly string[]).includes(locale.language)) return null;
  return locale.region ? `${locale.language}-${locale.region}` : locale.language;
}

/** The template language of a stored locale; English for anything unknown. */
export function templateLanguage(locale: string | null | undefined): Language {
  const lang = locale ? languageOf(locale) : DEFAULT_LOCALE;
  return (SUPPORTED_LANGUAGES as readonly string[]).includes(lang) ? (lang as Language) : 'en';
}

function languageOf(tag: string): string {
  return tag.split('-')[0].toLowerCase();
}

/**
 * The first supported language of an Accept-Language header, by quality; null when none.
 * For pages without an invoice (a payment link has no customer yet).
 */
export function negotiateLocale(header: string | undefined): string | null {
  if (!header) return null;
  const ranked = header
    .split(',')
    .map((part, i) => {
      const [tag, ...params] = part.trim().split(';');
      const q = params.map((p) => /^\s*q=([0-9.]+)\s*$/.exec(p)?.[1]).find((v) => v !== undefined);
      return { tag: tag.trim(), q: q === undefined ? 1 : Number(q), i };
    })
    .filter((e) => e.tag !== '' && e.tag !== '*' && e.q > 0)
    .sort((a, b) => b.q - a.q || a.i - b.i);
  for (const e of ranked) {
    const found = parseLocale(e.tag);
    if (found) return found;
  }
  return null;
}
