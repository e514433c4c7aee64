// Text of a PDF as a reader (or a screen reader, or a search index) would get it, one string per
// page, via pdf.js. Items on one line are concatenated (pdf.js emits the spaces between them);
// each line ends with "\n".
import { getDocument } from 'pdfjs-dist/legacy/build/pdf.mjs';

export async function extractPdfText(buf: Buffer | Uint8Array): Promise<string[]> {
  // pdf.js takes ownership of (and may detach) the bytes it is given: hand it a copy.
  const task = getDocument({ data: new Uint8Array(buf), verbosity: 0, isEvalSupported: false });
  const pdf = await task.promise;
  try {
    const pages: string[] = [];
    for (let n = 1; n <= pdf.numPages; n++) {
      const page = await pdf.getPage(n);
      const content = await page.getTextContent();
      let text = '';
      for (const item of content.items) {
        if ('str' in item) text += item.str + (item.hasEOL ? '\n' : '');
      }
      pages.push(text);
      page.cleanup();
    }
    return pages;
  } finally {
    await task.destroy();
  }
}
