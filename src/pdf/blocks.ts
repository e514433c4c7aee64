// The parts both documents are built from, top to bottom: the header (title, code, test-mode
// banner, parties, dates, payment network), the stamp's note, the table of lines with its
// repeated header, the total, labelled sections, and, once the page count is known, the page
// footers and the stamp across every page.
import type { Messages } from '../i18n/messages.js';
import { formatDocumentDate, formatInvoiceAmount, formatQuantity } from '../domain/invoice-format.js';
import type { InvoiceDocument, InvoiceDocumentLine, InvoiceStamp } from '../domain/invoice-document.js';
import { SANS, SANS_BOLD } from './fonts.js';
import {
  BODY_SIZE,
  bodyBottom,
  CELL_PAD_Y,
  contentWidth,
  draw,
  ensureSpace,
  FOOTER_GAP,
  LINK,
  measure,
  measureOneLine,
  MUTED,
  RULE,
  TEST_MODE_FILL,
  TEST_MODE_STROKE,
  TEST_MODE_TEXT,
  textAt,
  type Align,
  type Ctx,
  type Doc,
} from './layout.js';

interface Column {
  /** Catalogue key of the column title. */
  title: string;
  width: number;
  align: Align;
  /** A number: kept on one line, smaller if need be (measureOneLine). */
  numeric?: boolean;
  cell(line: InvoiceDocumentLine, doc: InvoiceDocument): string;
}

/** The smallest size a number in the table is shrunk to before it wraps. */
const MIN_NUMBER_SIZE = 5.5;

// A4 content width is 595.28 - 2 * 50 = 495.28; widths + 3 gutters of 8 add up to it.
const GUTTER = 8;
const COLUMNS: Column[] = [
  { title: 'pdf.col.description', width: 223.28, align: 'left', cell: (l) => l.description },
  { title: 'pdf.col.quantity', width: 60, align: 'right', numeric: true, cell: (l, d) => formatQuantity(l.quantity, d.locale) },
  { title: 'pdf.col.unitAmount', width: 96, align: 'right', numeric: true, cell: (l, d) => formatInvoiceAmount(d, l.unitAmount) },
  { title: 'pdf.col.lineTotal', width: 92, align: 'right', numeric: true, cell: (l, d) => formatInvoiceAmount(d, l.lineTotal) },
];

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

export function drawHeader(pdf: Doc, ctx: Ctx): void {
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

export function drawLines(pdf: Doc, { doc, m }: Ctx): void {
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
  if (doc.amountUnset) {
    const y = pdf.y;
    pdf.fillColor(MUTED);
    const height = textAt(pdf, m.t('pdf.noAmount'), left, y + CELL_PAD_Y, contentWidth(pdf));
    pdf.fillColor('black');
    pdf.moveTo(left, y + height + CELL_PAD_Y * 2).lineTo(right, y + height + CELL_PAD_Y * 2).lineWidth(0.4).strokeColor(RULE).stroke();
    pdf.y = y + height + CELL_PAD_Y * 2;
  }
  for (const line of doc.lines) {
    const cells = COLUMNS.map((col) =>
      col.numeric ? measureOneLine(pdf, col.cell(line, doc), col.width, BODY_SIZE, MIN_NUMBER_SIZE) : measure(pdf, col.cell(line, doc), col.width),
    );
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

export function drawTotal(pdf: Doc, { doc, m, kind }: Ctx): void {
  pdf.font(SANS_BOLD).fontSize(12).fillColor('black');
  const width = contentWidth(pdf);
  const values = { amount: formatInvoiceAmount(doc, doc.amount), currency: doc.currency, network: doc.network };
  const text = measure(pdf, doc.amountUnset ? m.t('pdf.totalUnset') : m.t(kind === 'receipt' ? 'pdf.totalPaid' : 'pdf.total', values), width);
  ensureSpace(pdf, text.height + 10);
  draw(pdf, text, pdf.page.margins.left, pdf.y + 10, width, { align: 'right' });
}

/** A labelled paragraph; moves to the next page as a whole when it does not fit. */
export function drawSection(pdf: Doc, label: string, body: string, link?: string): void {
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
export function drawPageFooters(pdf: Doc, { doc, m }: Ctx): void {
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
export function drawStampNote(pdf: Doc, stamp: InvoiceStamp): void {
  pdf.font(SANS_BOLD).fontSize(11).fillColor(STAMP_COLOURS[stamp.label]);
  textAt(pdf, `${stamp.text} · ${stamp.note}`, pdf.page.margins.left, pdf.y, contentWidth(pdf));
  pdf.fillColor('black');
  pdf.y += 8;
}

/** The stamp across the middle of every page, light enough to read the invoice through. */
export function drawStampMarks(pdf: Doc, stamp: InvoiceStamp): void {
  const range = pdf.bufferedPageRange();
  for (let i = range.start; i < range.start + range.count; i++) {
    pdf.switchToPage(i);
    const cx = pdf.page.width / 2;
    const cy = pdf.page.height / 2;
    pdf.save();
    pdf.rotate(-35, { origin: [cx, cy] });
    // 110 pt, smaller for a longer word ("BROUILLON") so that, at 35 degrees, it stays on the page.
    pdf.font(SANS_BOLD).fontSize(110);
    const size = Math.min(110, (110 * 0.95 * pdf.page.width) / pdf.widthOfString(stamp.text));
    pdf.fontSize(size).fillColor(STAMP_COLOURS[stamp.label]).fillOpacity(0.14);
    const width = pdf.widthOfString(stamp.text);
    pdf.text(stamp.text, cx - width / 2, cy - size * 0.55, { lineBreak: false });
    pdf.restore();
  }
}
