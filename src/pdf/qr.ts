// The QR code drawn beside a document's link to its payment page.
import QRCode from 'qrcode';
import type { Doc } from './layout.js';


/** The QR code of `text`, drawn as filled modules (vector, so it stays sharp at any zoom). */
export function drawQr(pdf: Doc, text: string, x: number, y: number, size: number): void {
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
