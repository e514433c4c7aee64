// The payment terms block of both documents: what to pay and where (an invoice), or what was paid
// and in which transaction (a receipt), beside a QR code of the payment page.
import { formatInvoiceAmount } from '../domain/invoice-format.js';
import { SANS, SANS_BOLD } from './fonts.js';
import { contentWidth, ensureSpace, LINK, MUTED, textAt, type Ctx, type Doc } from './layout.js';
import { drawQr } from './qr.js';

const QR_SIZE = 96; // points, quiet zone included: ~3.3 cm, scans from a screen or paper

/**
 * The payment terms: a QR code of the payment page beside the link, the chain id and the token
 * contract, so a payer can check them against what the wallet shows. Kept together on one page.
 */
export function drawPaymentTerms(pdf: Doc, { doc, m, kind }: Ctx): void {
  const left = pdf.page.margins.left;
  const width = contentWidth(pdf);
  // A draft's preview has no page yet (it is made at send): no link, no code to scan. A paid or
  // void invoice's page asks for nothing: its link is to view it, like a receipt's.
  const page = doc.stamp?.label !== 'DRAFT';
  const asksToPay = kind === 'invoice' && doc.stamp === undefined;
  const qrSize = page ? QR_SIZE : 0;
  const textX = page ? left + QR_SIZE + 14 : left;
  const textWidth = page ? width - QR_SIZE - 14 : width;
  // The on-chain lines make the text column taller than the QR code.
  const payments = kind === 'receipt' ? (doc.payments ?? []) : [];
  ensureSpace(pdf, 30 + qrSize + (doc.onChain || payments.length > 0 ? 50 + 12 * payments.length : 0));
  pdf.font(SANS_BOLD).fontSize(8).fillColor(MUTED);
  const y = pdf.y + 16;
  let top = y;
  if (page) {
    const labelHeight = textAt(pdf, m.t(asksToPay ? 'payOnline' : 'viewOnline').toUpperCase(), left, y, width);
    top = y + labelHeight + 4;
    drawQr(pdf, doc.payUrl, left, top, QR_SIZE);
  }
  let ty = top + 4;
  if (page) {
    pdf.font(SANS).fontSize(10).fillColor(LINK);
    // `link` makes pdfkit add a URI link annotation over the text.
    ty += textAt(pdf, doc.payUrl, textX, ty, textWidth, { link: doc.payUrl, maxHeight: 40 }) + 4;
  }
  pdf.font(SANS).fillColor('black').fontSize(9);
  if (asksToPay) ty += textAt(pdf, m.t('pdf.scanToPay'), textX, ty, textWidth) + 6;
  if (!doc.amountUnset) ty += textAt(pdf, m.t('amountOn', { amount: formatInvoiceAmount(doc, doc.amount), currency: doc.currency, network: doc.network }), textX, ty, textWidth) + 2;
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
    // Only what is true of this invoice: the proxy (and the page's wallet) only where its chain has one.
    ty += textAt(pdf, m.t(doc.onChain.viaProxy ? 'howToPayOnChain' : 'howToPayByTransfer'), textX, ty, textWidth) + 2;
    pdf.fillColor('black');
  }
  // Every payment that made up the total, each with its transaction.
  for (const { amount, txHash, url } of payments) {
    // A hash has no break opportunity: 66 characters at 8 points may wrap by character, which is fine.
    pdf.fillColor(url ? LINK : 'black');
    ty += textAt(pdf, m.t('pdf.transaction', { txHash, amount: formatInvoiceAmount(doc, amount), currency: doc.currency }), textX, ty, textWidth, url ? { link: url } : {}) + 2;
    pdf.fillColor('black');
  }
  pdf.y = Math.max(top + qrSize, ty);
}
