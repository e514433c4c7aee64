// Writes an invoice or its receipt to a PDF. A pure function of its input: the same document gives the
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
// - The parsed fonts shared between renders get a fresh glyph cache per render (see fonts.ts).
// Verified by rendering twice, and cold versus after other invoices (render-invoice-pdf.test.ts).
import PDFDocument from 'pdfkit';
import { messagesFor } from '../i18n/messages.js';
import type { InvoiceDocument } from '../domain/invoice-document.js';
import { drawHeader, drawLines, drawPageFooters, drawSection, drawStampMarks, drawStampNote, drawTotal } from './blocks.js';
import { registerFonts } from './fonts.js';
import { MARGIN, type Ctx, type PdfKind } from './layout.js';
import { drawPaymentTerms } from './payment-terms.js';

function fixedDate(iso: string): Date {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) throw new RangeError(`invalid issuedAt "${iso}"`);
  return d;
}

/** The document of either kind; renderInvoicePdf and renderReceiptPdf are the entry points. */
export async function renderPdf(doc: InvoiceDocument, kind: PdfKind): Promise<Buffer> {
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

  registerFonts(pdf);

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
