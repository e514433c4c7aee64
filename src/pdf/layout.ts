// Page geometry, the palette, and the text primitives every part of a document is drawn with.
// The primitives place every text explicitly, so page breaks are decided here (ensureSpace), never
// by pdfkit.
import type { Messages } from '../i18n/messages.js';
import type { InvoiceDocument } from '../domain/invoice-document.js';

export const MARGIN = 50;
export const FOOTER_GAP = 20; // space under the body reserved for the "Page n of m" line
export const BODY_SIZE = 9;
export const CELL_PAD_Y = 4;
export const MUTED = '#555555';
export const RULE = '#cccccc';
export const LINK = '#1a4fd6';
export const TEST_MODE_FILL = '#fff4ce';
export const TEST_MODE_STROKE = '#d4a72c';
export const TEST_MODE_TEXT = '#4d2d00';

/** What one render writes: an invoice (asks for payment) or its receipt (confirms it). */
export type PdfKind = 'invoice' | 'receipt';

/** The document, the phrases of its locale and the kind: what every drawing function needs. */
export interface Ctx {
  doc: InvoiceDocument;
  m: Messages;
  kind: PdfKind;
}

export type Align = 'left' | 'right';

export type Doc = PDFKit.PDFDocument;

export function contentWidth(pdf: Doc): number {
  return pdf.page.width - pdf.page.margins.left - pdf.page.margins.right;
}

/** Lowest y the body may reach on the current page. */
export function bodyBottom(pdf: Doc): number {
  return pdf.page.height - pdf.page.margins.bottom - FOOTER_GAP;
}

/** Starts a new page when `height` does not fit; returns true if it did. */
export function ensureSpace(pdf: Doc, height: number): boolean {
  if (pdf.y + height <= bodyBottom(pdf)) return false;
  pdf.addPage();
  pdf.y = pdf.page.margins.top;
  return true;
}

export interface Measured {
  text: string;
  /** Fits on one line: drawn without pdfkit's LineWrapper, which dominates render time when run
   * for every cell of a long table. */
  single: boolean;
  height: number;
  /** Drawn at this font size, then back to `baseSize` (measureOneLine shrank it to fit). */
  size?: number;
  baseSize?: number;
}

export function measure(pdf: Doc, raw: string, width: number): Measured {
  // A bare CR would be drawn as a missing-glyph box; user text (memo, footer) often has CRLF.
  const text = raw.replace(/\r\n?/g, '\n');
  if (!text.includes('\n') && pdf.widthOfString(text) <= width) {
    return { text, single: true, height: pdf.currentLineHeight(true) };
  }
  return { text, single: false, height: pdf.heightOfString(text, { width }) };
}

/**
 * A number (an amount, a quantity): broken over two lines its first line reads as a whole, smaller
 * number. So it stays on one line, drawn smaller when it does not fit at `size` (the current size),
 * down to `minSize`; only a number too long even then wraps.
 */
export function measureOneLine(pdf: Doc, text: string, width: number, size: number, minSize: number): Measured {
  // Measured once, and wrapped (pdfkit's costly LineWrapper) only when even `minSize` is too big.
  const natural = text.includes('\n') ? Infinity : pdf.widthOfString(text);
  if (natural <= width) return { text, single: true, height: pdf.currentLineHeight(true) };
  const fitted = Math.floor(((size * width) / natural) * 10) / 10;
  if (fitted < minSize) return measure(pdf, text, width);
  return { text, single: true, height: pdf.currentLineHeight(true), size: fitted, baseSize: size };
}

export interface DrawOptions {
  align?: Align;
  /** Clamp (with an ellipsis) instead of letting pdfkit flow the text onto a new page. */
  maxHeight?: number;
  link?: string;
}

/**
 * Every text call gets an explicit position and a height limit, so pdfkit never adds pages on its
 * own: page breaks are decided by ensureSpace() alone, which is what lets the table header repeat.
 */
export function draw(pdf: Doc, m: Measured, x: number, y: number, width: number, opts: DrawOptions = {}): void {
  const link = opts.link ? { link: opts.link, underline: true } : {};
  if (m.single) {
    if (m.size !== undefined) pdf.fontSize(m.size);
    const dx = opts.align === 'right' ? width - pdf.widthOfString(m.text) : 0;
    pdf.text(m.text, x + dx, y, { lineBreak: false, ...link });
    if (m.baseSize !== undefined) pdf.fontSize(m.baseSize);
  } else {
    const height = opts.maxHeight ?? bodyBottom(pdf) - y;
    pdf.text(m.text, x, y, { width, height, ellipsis: true, align: opts.align ?? 'left', ...link });
  }
  pdf.y = y + Math.min(m.height, opts.maxHeight ?? Infinity);
}

export function textAt(pdf: Doc, text: string, x: number, y: number, width: number, opts: DrawOptions = {}): number {
  const m = measure(pdf, text, width);
  draw(pdf, m, x, y, width, opts);
  return m.height;
}
