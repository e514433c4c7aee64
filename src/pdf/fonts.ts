// The DejaVu Sans faces every PDF is set in, registered under the names the drawing code uses.
//
// Read and parsed once per process. Parsing a TTF with fontkit (cmap, GSUB/GPOS, hmtx...)
// was ~75% of a render when done per document; pdfkit 0.20 accepts an already-parsed fontkit Font
// in registerFont()/font() (CHANGELOG v0.20.0), and each document still builds its own subset.
//
// Sharing one parsed font has a trap: fontkit caches Glyph objects per font, and a glyph keeps the
// code points it was first created with. A glyph first created as a component of a composite (η
// inside ή, when an earlier invoice's subset was written) has none, so a later invoice's
// ToUnicode map would lose "η": different bytes, and the letter no longer extractable. Each
// render therefore starts from an empty glyph cache (the decoded tables stay shared), which makes
// it behave exactly like a freshly parsed font. This relies on a render being synchronous from
// the first draw call to pdf.end(); renders never interleave inside fontkit.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

/** The names the faces are registered under in every document. */
export const SANS = 'Sans';
export const SANS_BOLD = 'Sans-Bold';

/** The part of a fontkit Font we rely on; pdfkit recognises a parsed font by `layout`. */
interface ParsedFont {
  postscriptName: string;
  layout(text: string): unknown;
  /** fontkit's private glyph cache (TTFFont#_glyphs); see above. */
  _glyphs: Record<number, unknown>;
}

interface Fonts {
  regular: ParsedFont;
  bold: ParsedFont;
}

let fonts: Fonts | null = null;

function parseFont(create: (data: Uint8Array) => unknown, file: string): ParsedFont {
  const font = create(readFileSync(file)) as Partial<ParsedFont>;
  // Fail loudly if a fontkit upgrade renames the cache, rather than silently losing determinism.
  if (typeof font.layout !== 'function' || typeof font._glyphs !== 'object' || font._glyphs === null) {
    throw new Error(`fontkit font from ${file} lacks layout()/_glyphs; check the glyph cache reset`);
  }
  return font as ParsedFont;
}

function loadFonts(): Fonts {
  if (fonts === null) {
    const require = createRequire(import.meta.url);
    // fontkit is pdfkit's dependency, not ours: resolve it from pdfkit so we get the version
    // pdfkit was built against, however the tree is hoisted.
    const fontkit = createRequire(require.resolve('pdfkit'))('fontkit') as { create(data: Uint8Array): unknown };
    const dir = path.join(path.dirname(require.resolve('dejavu-fonts-ttf/package.json')), 'ttf');
    fonts = {
      regular: parseFont(fontkit.create, path.join(dir, 'DejaVuSans.ttf')),
      bold: parseFont(fontkit.create, path.join(dir, 'DejaVuSans-Bold.ttf')),
    };
  }
  fonts.regular._glyphs = {};
  fonts.bold._glyphs = {};
  return fonts;
}

/** @types/pdfkit only lists byte sources; the parsed-font overload is newer than the types. */
function asFontSource(font: ParsedFont): PDFKit.Mixins.PDFFontSource {
  return font as unknown as PDFKit.Mixins.PDFFontSource;
}

/** Registers both faces on a new document, each with an empty glyph cache (see above). */
export function registerFonts(pdf: PDFKit.PDFDocument): void {
  const { regular, bold } = loadFonts();
  pdf.registerFont(SANS, asFontSource(regular));
  pdf.registerFont(SANS_BOLD, asFontSource(bold));
}
