// Reads QR codes back, as a phone would: from a PDF page rendered to pixels by poppler's
// pdftoppm, or from a PNG (a browser screenshot), decoded by jsQR.
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import jsQRModule from 'jsqr';
import { PNG } from 'pngjs';

const run = promisify(execFile);

// jsqr is CommonJS whose typings declare an ES default export: under NodeNext the default import
// is the CommonJS module object, which carries the function as `default`.
const jsQR = (jsQRModule as unknown as { default: typeof jsQRModule.default }).default;

/** Whether pdftoppm (poppler-utils) is installed; tests that need it skip with a message otherwise. */
export async function hasPdftoppm(): Promise<boolean> {
  try {
    await run('pdftoppm', ['-v']);
    return true;
  } catch {
    return false;
  }
}

/** The text of the QR code found in a PNG, or null when there is none. */
export function decodeQrPng(png: Buffer): string | null {
  const image = PNG.sync.read(png);
  const found = jsQR(new Uint8ClampedArray(image.data.buffer, image.data.byteOffset, image.data.length), image.width, image.height);
  return found?.data ?? null;
}

/** Renders one page of a PDF at `dpi` and decodes the QR code on it. */
export async function decodeQrInPdf(pdf: Buffer, page = 1, dpi = 150): Promise<string | null> {
  const dir = await mkdtemp(path.join(tmpdir(), 'qr-'));
  try {
    await writeFile(path.join(dir, 'doc.pdf'), pdf);
    await run('pdftoppm', ['-r', String(dpi), '-png', '-f', String(page), '-l', String(page), '-singlefile', 'doc.pdf', 'page'], { cwd: dir });
    return decodeQrPng(await readFile(path.join(dir, 'page.png')));
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
