// Renders an InvoiceDocument to a PDF. A pure function of its input: the same document gives the
// same bytes, so a re-render (retry, resend) attaches an identical file and tests can compare
// buffers.
//
// How determinism is achieved with pdfkit 0.20:
// - CreationDate/ModDate are taken from doc.issuedAt instead of `new Date()`.
// - The trailer /ID is md5(info dict) (PDFSecurity.generateFileID), computed from the info we
//   pass in; the info carries the invoice id and code, so the ID is fixed per invoice and differs
//   between invoices.
// - Font subset tags ("CZZZZZ+DejaVuSans-Bold") are derived from the font's resource id
//   (F1, F2...), which pdfkit hands out in order of first use: fixed by this code, not random.
// - pdfkit only uses random bytes for encryption, which we do not enable.
// - The parsed fonts shared between renders get a fresh glyph cache per render (see loadFonts).
// Verified by rendering twice, and cold versus after other invoices (render-invoice-pdf.test.ts).
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import PDFDocument from 'pdfkit';
import QRCode from 'qrcode';
import { messagesFor, type Messages } from '../i18n/messages.js';
import { formatDocumentDate, formatInvoiceAmount, formatQuantity } from '../domain/invoice-format.js';
import type { InvoiceDocument, InvoiceDocumentLine, InvoiceStamp } from '../domain/invoice-document.js';

// ---------------------------------------------------------------------------------------------
// Fonts: read and parsed once per process. Parsing a TTF with fontkit (cmap, GSUB/GPOS, hmtx...)
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

// ---------------------------------------------------------------------------------------------
// Layout

const SANS = 'Sans';
const SANS_BOLD = 'Sans-Bold';
const MARGIN = 50;
const FOOTER_GAP = 20; // space under the body reserved for the "Page n of m" line
const BODY_SIZE = 9;
const CELL_PAD_Y = 4;
const MUTED = '#555555';
const RULE = '#cccccc';
const LINK = '#1a4fd6';
const TEST_MODE_FILL = '#fff4ce';
const TEST_MODE_STROKE = '#d4a72c';
const TEST_MODE_TEXT = '#4d2d00';
const QR_SIZE = 96; // points, quiet zone included: ~3.3 cm, scans from a screen or paper

/** What one render writes: an invoice (asks for payment) or its receipt (confirms it). */
export type PdfKind = 'invoice' | 'receipt';

/** The document, the phrases of its locale and the kind: what every drawing function needs. */
interface Ctx {
  doc: InvoiceDocument;
  m: Messages;
  kind: PdfKind;
}

type Align = 'left' | 'right';

interface Column {
  /** Catalogue key of the column title. */
  title: string;
  width: number;
  align: Align;
  cell(line: InvoiceDocumentLine, doc: InvoiceDocument): string;
}

// A4 content width is 595.28 - 2 * 50 = 495.28; widths + 3 gutters of 8 add up to it.
const GUTTER = 8;
const COLUMNS: Column[] = [
  { title: 'pdf.col.description', width: 223.28, align: 'left', cell: (l) => l.description },
  { title: 'pdf.col.quantity', width: 60, align: 'right', cell: (l, d) => formatQuantity(l.quantity, d.locale) },
  { title: 'pdf.col.unitAmount', width: 96, align: 'right', cell: (l, d) => formatInvoiceAmount(d, l.unitAmount) },
  { title: 'pdf.col.lineTotal', width: 92, align: 'right', cell: (l, d) => formatInvoiceAmount(d, l.lineTotal) },
];

type Doc = PDFKit.PDFDocument;

function contentWidth(pdf: Doc): number {
  return pdf.page.width - pdf.page.margins.left - pdf.page.margins.right;
}

/** Lowest y the body may reach on the current page. */
function bodyBottom(pdf: Doc): number {
  return pdf.page.height - pdf.page.margins.bottom - FOOTER_GAP;
}

/** Starts a new page when `height` does not fit; returns true if it did. */
function ensureSpace(pdf: Doc, height: number): boolean {
  if (pdf.y + height <= bodyBottom(pdf)) return false;
  pdf.addPage();
  pdf.y = pdf.page.margins.top;
  return true;
}

interface Measured {
  text: string;
  /** Fits on one line: drawn without pdfkit's LineWrapper, which dominates render time when run
   * for every cell of a long table. */
  single: boolean;
  height: number;
}

function measure(pdf: Doc, raw: string, width: number): Measured {
  // A bare CR would be drawn as a missing-glyph box; user text (memo, footer) often has CRLF.
  const text = raw.replace(/\r\n?/g, '\n');
  if (!text.includes('\n') && pdf.widthOfString(text) <= width) {
    return { text, single: true, height: pdf.currentLineHeight(true) };
  }
  return { text, single: false, height: pdf.heightOfString(text, { width }) };
}

interface DrawOptions {
  align?: Align;
  /** Clamp (with an ellipsis) instead of letting pdfkit flow the text onto a new page. */
  maxHeight?: number;
  link?: string;
}

/**
 * Every text call gets an explicit position and a height limit, so pdfkit never adds pages on its
 * own: page breaks are decided by ensureSpace() alone, which is what lets the table header repeat.
 */
function draw(pdf: Doc, m: Measured, x: number, y: number, width: number, opts: DrawOptions = {}): void {
  const link = opts.link ? { link: opts.link, underline: true } : {};
  if (m.single) {
    const dx = opts.align === 'right' ? width - pdf.widthOfString(m.text) : 0;
    pdf.text(m.text, x + dx, y, { lineBreak: false, ...link });
  } else {
    const height = opts.maxHeight ?? bodyBottom(pdf) - y;
    pdf.text(m.text, x, y, { width, height, ellipsis: true, align: opts.align ?? 'left', ...link });
  }
  pdf.y = y + Math.min(m.height, opts.maxHeight ?? Infinity);
}

function textAt(pdf: Doc, text: string, x: number, y: number, width: number, opts: DrawOptions = {}): number {
  const m = measure(pdf, text, width);
  draw(pdf, m, x, y, width, opts);
  return m.height;
}

/** The sandbox notice, boxed, across the content width at the current y. */
function drawTestModeBanner(pdf: Doc, { doc, m }: Ctx): void {
  const left = pdf.page.margins.left;
  const width = contentWidth(pdf);
  pdf.font(SANS_BOLD).fontSize(10);
  const text = measure(pdf, m.t('testMode', { network: doc.network }), width - 16);
  const y = pdf.y;
  const height = text.height + 12;
  pdf.rect(left, y, width, height).lineWidth(0.8).fillAndStroke(TEST_MODE_FILL, TEST_MODE_STROKE);
  pdf.fillColor(TEST_MODE_TEXT);
  draw(pdf, text, left + 8, y + 6, width - 16);
  pdf.fillColor('black');
  pdf.y = y + height + 12;
}

function drawHeader(pdf: Doc, ctx: Ctx): void {
  const { doc, m } = ctx;
  const left = pdf.page.margins.left;
  const width = contentWidth(pdf);
  const top = pdf.page.margins.top;

  pdf.font(SANS_BOLD).fontSize(20).fillColor('black');
  const titleHeight = textAt(pdf, m.t(`pdf.title.${ctx.kind}`), left, top, width / 2);
  pdf.fontSize(12);
  const codeHeight = textAt(pdf, doc.code, left + width / 2, top + 6, width / 2, { align: 'right' });

  const colWidth = (width - 20) / 2;
  // A long code wraps; the blocks start under whichever of title and code ends lower.
  pdf.y = top + Math.max(titleHeight, codeHeight + 6) + 12;
  if (doc.testMode) drawTestModeBanner(pdf, ctx);
  else pdf.y += 4;
  let yLeft = pdf.y;
  let yRight = yLeft;

  const block = (x: number, y: number, label: string, rows: string[]): number => {
    pdf.font(SANS_BOLD).fontSize(8).fillColor(MUTED);
    y += textAt(pdf, label.toUpperCase(), x, y, colWidth) + 2;
    pdf.font(SANS).fontSize(10).fillColor('black');
    for (const row of rows) y += textAt(pdf, row, x, y, colWidth) + 1;
    return y + 10;
  };

  const merchantRows = [doc.merchant.name];
  if (doc.merchant.email) merchantRows.push(doc.merchant.email);
  if (doc.taxId) merchantRows.push(m.t('pdf.taxId', { id: doc.taxId }));
  yLeft = block(left, yLeft, m.t('pdf.from'), merchantRows);

  const customerRows = doc.customer.name ? [doc.customer.name, doc.customer.email] : [doc.customer.email];
  yLeft = block(left, yLeft, m.t('pdf.billTo'), customerRows);

  const date = (iso: string) => formatDocumentDate(iso, doc.timeZone, doc.locale);
  const dates = [m.t('pdf.issued', { date: date(doc.issuedAt) })];
  if (doc.dueAt) dates.push(m.t('pdf.due', { date: date(doc.dueAt) }));
  if (ctx.kind === 'receipt' && doc.paidAt) dates.push(m.t('pdf.paidOn', { date: date(doc.paidAt) }));
  yRight = block(left + colWidth + 20, yRight, m.t('pdf.dates'), dates);
  yRight = block(left + colWidth + 20, yRight, m.t('pdf.payment'), [
    m.t('tokenOn', { currency: doc.currency, network: doc.network }),
    m.t('pdf.chain', { chainId: doc.chainId }),
  ]);

  pdf.y = Math.max(yLeft, yRight) + 6;
}

function columnX(pdf: Doc, index: number): number {
  let x = pdf.page.margins.left;
  for (let i = 0; i < index; i++) x += COLUMNS[i].width + GUTTER;
  return x;
}

function drawTableHeader(pdf: Doc, m: Messages): void {
  pdf.font(SANS_BOLD).fontSize(BODY_SIZE).fillColor('black');
  const y = pdf.y;
  const h = pdf.currentLineHeight() + CELL_PAD_Y * 2;
  COLUMNS.forEach((col, i) => textAt(pdf, m.t(col.title), columnX(pdf, i), y + CELL_PAD_Y, col.width, { align: col.align }));
  const left = pdf.page.margins.left;
  pdf.moveTo(left, y + h).lineTo(left + contentWidth(pdf), y + h).lineWidth(0.8).strokeColor('black').stroke();
  pdf.y = y + h;
}

function drawLines(pdf: Doc, { doc, m }: Ctx): void {
  pdf.font(SANS).fontSize(BODY_SIZE);
  // Never leave the table header alone at the bottom of a page.
  ensureSpace(pdf, 4 * pdf.currentLineHeight(true) + 4 * CELL_PAD_Y);
  drawTableHeader(pdf, m);
  pdf.font(SANS).fontSize(BODY_SIZE);
  const left = pdf.page.margins.left;
  const right = left + contentWidth(pdf);
  // A single row taller than a page cannot be split across pages in a table; clamp it (with an
  // ellipsis) to what one page holds under the header.
  const maxRowHeight = bodyBottom(pdf) - pdf.page.margins.top - 3 * pdf.currentLineHeight();
  for (const line of doc.lines) {
    const cells = COLUMNS.map((col) => measure(pdf, col.cell(line, doc), col.width));
    const textHeight = Math.min(maxRowHeight, Math.max(...cells.map((c) => c.height)));
    const rowHeight = textHeight + CELL_PAD_Y * 2;
    if (ensureSpace(pdf, rowHeight)) {
      drawTableHeader(pdf, m);
      pdf.font(SANS).fontSize(BODY_SIZE);
    }
    const y = pdf.y;
    pdf.fillColor('black');
    cells.forEach((c, i) =>
      draw(pdf, c, columnX(pdf, i), y + CELL_PAD_Y, COLUMNS[i].width, { align: COLUMNS[i].align, maxHeight: textHeight }),
    );
    pdf.moveTo(left, y + rowHeight).lineTo(right, y + rowHeight).lineWidth(0.4).strokeColor(RULE).stroke();
    pdf.y = y + rowHeight;
  }
}

function drawTotal(pdf: Doc, { doc, m, kind }: Ctx): void {
  pdf.font(SANS_BOLD).fontSize(12).fillColor('black');
  const width = contentWidth(pdf);
  const values = { amount: formatInvoiceAmount(doc, doc.amount), currency: doc.currency, network: doc.network };
  const text = measure(pdf, m.t(kind === 'receipt' ? 'pdf.totalPaid' : 'pdf.total', values), width);
  ensureSpace(pdf, text.height + 10);
  draw(pdf, text, pdf.page.margins.left, pdf.y + 10, width, { align: 'right' });
}

/** The QR code of `text`, drawn as filled modules (vector, so it stays sharp at any zoom). */
function drawQr(pdf: Doc, text: string, x: number, y: number, size: number): void {
  const qr = QRCode.create(text, { errorCorrectionLevel: 'M' });
  const n = qr.modules.size;
  const quiet = 4; // the quiet zone the QR standard asks for, in modules
  const cell = size / (n + 2 * quiet);
  pdf.rect(x, y, size, size).fill('white');
  pdf.fillColor('black');
  for (let row = 0; row < n; row++) {
    // One rectangle per horizontal run of dark modules: fewer drawing operators, same picture.
    let col = 0;
    while (col < n) {
      if (!qr.modules.get(row, col)) {
        col++;
        continue;
      }
      const start = col;
      while (col < n && qr.modules.get(row, col)) col++;
      pdf.rect(x + (quiet + start) * cell, y + (quiet + row) * cell, (col - start) * cell, cell);
    }
  }
  pdf.fill('black');
}

/**
 * The payment terms: a QR code of the payment page beside the link, the chain id and the token
 * contract, so a payer can check them against what the wallet shows. Kept together on one page.
 */
function drawPaymentTerms(pdf: Doc, { doc, m, kind }: Ctx): void {
  const left = pdf.page.margins.left;
  const width = contentWidth(pdf);
  const textX = left + QR_SIZE + 14;
  const textWidth = width - QR_SIZE - 14;
  // The on-chain lines make the text column taller than the QR code.
  ensureSpace(pdf, 30 + QR_SIZE + (doc.onChain || doc.transaction ? 50 : 0));
  pdf.font(SANS_BOLD).fontSize(8).fillColor(MUTED);
  const y = pdf.y + 16;
  // A receipt asks for nothing: its link is to the (paid) page, not to pay.
  const labelHeight = textAt(pdf, m.t(kind === 'receipt' ? 'viewOnline' : 'payOnline').toUpperCase(), left, y, width);
  const top = y + labelHeight + 4;
  drawQr(pdf, doc.payUrl, left, top, QR_SIZE);
  let ty = top + 4;
  pdf.font(SANS).fontSize(10).fillColor(LINK);
  // `link` makes pdfkit add a URI link annotation over the text.
  ty += textAt(pdf, doc.payUrl, textX, ty, textWidth, { link: doc.payUrl, maxHeight: 40 }) + 4;
  pdf.fillColor('black').fontSize(9);
  if (kind === 'invoice') ty += textAt(pdf, m.t('pdf.scanToPay'), textX, ty, textWidth) + 6;
  ty += textAt(pdf, m.t('amountOn', { amount: formatInvoiceAmount(doc, doc.amount), currency: doc.currency, network: doc.network }), textX, ty, textWidth) + 2;
  ty += textAt(pdf, m.t('pdf.chain', { chainId: doc.chainId }), textX, ty, textWidth) + 2;
  if (doc.tokenAddress) {
    // An address is 42 characters with no break opportunity: small enough to stay on one line.
    pdf.fontSize(8);
    ty += textAt(pdf, m.t('pdf.tokenContract', { address: doc.tokenAddress }), textX, ty, textWidth) + 2;
  }
  pdf.fontSize(8);
  if (kind === 'invoice' && doc.onChain) {
    ty += textAt(pdf, m.t('pdf.payTo', { address: doc.onChain.to }), textX, ty, textWidth) + 2;
    pdf.font(SANS_BOLD);
    ty += textAt(pdf, m.t('pdf.paymentReference', { reference: doc.onChain.paymentReference }), textX, ty, textWidth) + 2;
    pdf.font(SANS).fillColor(MUTED);
    ty += textAt(pdf, m.t('howToPayOnChain'), textX, ty, textWidth) + 2;
    pdf.fillColor('black');
  }
  if (kind === 'receipt' && doc.transaction) {
    const { txHash, url } = doc.transaction;
    // A hash has no break opportunity: 66 characters at 8 points may wrap by character, which is fine.
    pdf.fillColor(url ? LINK : 'black');
    ty += textAt(pdf, m.t('pdf.transaction', { txHash }), textX, ty, textWidth, url ? { link: url } : {}) + 2;
    pdf.fillColor('black');
  }
  pdf.y = Math.max(top + QR_SIZE, ty);
}

/** A labelled paragraph; moves to the next page as a whole when it does not fit. */
function drawSection(pdf: Doc, label: string, body: string, link?: string): void {
  const left = pdf.page.margins.left;
  const width = contentWidth(pdf);
  pdf.font(SANS).fontSize(10);
  const m = measure(pdf, body, width);
  const maxHeight = bodyBottom(pdf) - pdf.page.margins.top - 30;
  ensureSpace(pdf, 30 + Math.min(m.height, maxHeight));
  pdf.font(SANS_BOLD).fontSize(8).fillColor(MUTED);
  const y = pdf.y + 16;
  const labelHeight = textAt(pdf, label.toUpperCase(), left, y, width);
  pdf.font(SANS).fontSize(10).fillColor(link ? LINK : 'black');
  // `link` makes pdfkit add a URI link annotation over each line of the text.
  draw(pdf, m, left, y + labelHeight + 2, width, { maxHeight, link });
  pdf.fillColor('black');
}

/**
 * "INV-1 · Page 1 of 3" under every page's body, and on a sandbox document the test-mode notice
 * under it, in the bottom margin: every page says it, not only the first. Drawn last, when the
 * page count is known.
 */
function drawPageFooters(pdf: Doc, { doc, m }: Ctx): void {
  const range = pdf.bufferedPageRange();
  for (let i = range.start; i < range.start + range.count; i++) {
    pdf.switchToPage(i);
    pdf.font(SANS).fontSize(8).fillColor(MUTED);
    const y = pdf.page.height - pdf.page.margins.bottom - FOOTER_GAP + 8;
    // lineBreak: false keeps pdfkit from treating text near the margin as overflow.
    pdf.text(m.t('pdf.page', { code: doc.code, page: i + 1, pages: range.count }), pdf.page.margins.left, y, { lineBreak: false });
    if (doc.testMode) {
      pdf.font(SANS_BOLD).fillColor(TEST_MODE_TEXT);
      pdf.text(m.t('testMode', { network: doc.network }), pdf.page.margins.left, y + 12, { lineBreak: false });
    }
  }
}

const STAMP_COLOURS: Record<InvoiceStamp['label'], string> = { DRAFT: '#8a8a8a', PAID: '#1b7f3b', VOID: '#b3261e' };

/** The stamp's note under the header blocks ("PAID · Paid on 3 March 2026"). */
function drawStampNote(pdf: Doc, stamp: InvoiceStamp): void {
  pdf.font(SANS_BOLD).fontSize(11).fillColor(STAMP_COLOURS[stamp.label]);
  textAt(pdf, `${stamp.label} · ${stamp.note}`, pdf.page.margins.left, pdf.y, contentWidth(pdf));
  pdf.fillColor('black');
  pdf.y += 8;
}

/** The stamp across the middle of every page, light enough to read the invoice through. */
function drawStampMarks(pdf: Doc, stamp: InvoiceStamp): void {
  const range = pdf.bufferedPageRange();
  for (let i = range.start; i < range.start + range.count; i++) {
    pdf.switchToPage(i);
    const cx = pdf.page.width / 2;
    const cy = pdf.page.height / 2;
    pdf.save();
    pdf.rotate(-35, { origin: [cx, cy] });
    pdf.font(SANS_BOLD).fontSize(110).fillColor(STAMP_COLOURS[stamp.label]).fillOpacity(0.14);
    const width = pdf.widthOfString(stamp.label);
    pdf.text(stamp.label, cx - width / 2, cy - 60, { lineBreak: false });
    pdf.restore();
  }
}

function fixedDate(iso: string): Date {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) throw new RangeError(`invalid issuedAt "${iso}"`);
  return d;
}

/** The invoice PDF attached to the invoice email and the reminders. */
export async function renderInvoicePdf(doc: InvoiceDocument): Promise<Buffer> {
  return renderPdf(doc, 'invoice');
}

/** The receipt PDF of a paid invoice (amount, token, network, paid date, invoice code). */
export async function renderReceiptPdf(doc: InvoiceDocument): Promise<Buffer> {
  if (!doc.paidAt) throw new RangeError(`a receipt needs paidAt (invoice ${doc.invoiceId})`);
  return renderPdf(doc, 'receipt');
}

/** Either document by its kind: what a render thread runs, and the main thread's RenderPdf. */
export function renderDocumentPdf(doc: InvoiceDocument, kind: PdfKind = 'invoice'): Promise<Buffer> {
  return kind === 'receipt' ? renderReceiptPdf(doc) : renderInvoicePdf(doc);
}

async function renderPdf(doc: InvoiceDocument, kind: PdfKind): Promise<Buffer> {
  const { regular, bold } = loadFonts();
  const ctx: Ctx = { doc, m: messagesFor(doc.locale), kind };
  const title = ctx.m.t(kind === 'receipt' ? 'pdf.receiptFor' : 'invoice.subject', { code: doc.code, merchantName: doc.merchant.name });
  // A receipt is dated when the payment was made; an invoice when it was issued.
  const issued = fixedDate(kind === 'receipt' ? doc.paidAt! : doc.issuedAt);
  const pdf = new PDFDocument({
    size: 'A4',
    margin: MARGIN,
    bufferPages: true, // page footers need the final page count
    autoFirstPage: true,
    // The trailer /ID is md5 of this dict, so it must be a function of the invoice only.
    info: {
      Title: `${ctx.m.t(`pdf.title.${kind}`)} ${doc.code}`,
      Author: doc.merchant.name,
      Subject: title,
      Keywords: `${kind} ${doc.code} ${doc.invoiceId}`,
      Creator: 'invoice-service',
      Producer: 'PDFKit',
      CreationDate: issued,
      ModDate: issued,
    },
  });

  const chunks: Buffer[] = [];
  const done = new Promise<Buffer>((resolve, reject) => {
    pdf.on('data', (chunk: Buffer) => chunks.push(chunk));
    pdf.on('end', () => resolve(Buffer.concat(chunks)));
    pdf.on('error', reject);
  });

  pdf.registerFont(SANS, asFontSource(regular));
  pdf.registerFont(SANS_BOLD, asFontSource(bold));

  drawHeader(pdf, ctx);
  if (doc.stamp) drawStampNote(pdf, doc.stamp);
  drawLines(pdf, ctx);
  drawTotal(pdf, ctx);
  if (kind === 'receipt') drawSection(pdf, ctx.m.t('label.status'), ctx.m.t('pdf.receiptThanks'));
  if (doc.memo) drawSection(pdf, ctx.m.t('label.memo'), doc.memo);
  drawPaymentTerms(pdf, ctx);
  if (doc.footer) drawSection(pdf, ctx.m.t('label.notes'), doc.footer);
  drawPageFooters(pdf, ctx);
  if (doc.stamp) drawStampMarks(pdf, doc.stamp);

  pdf.end();
  return done;
}
