// A page compared with its committed baseline PNG, loosely (fonts hint differently between
// machines): the share of differing pixels, pixels outside the common area counting as different
// so a page that grew or shrank fails. No baseline, or UPDATE_SCREENSHOTS=1: the shot is written
// (and, without the variable, the test fails so the new baseline is looked at before it is committed).
import { existsSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import pixelmatch from 'pixelmatch';
import type { Locator, Page } from 'playwright-core';
import { PNG } from 'pngjs';
import { expect } from 'vitest';

export async function expectLikeBaseline(page: Page, baseline: URL, mask: Locator[]): Promise<void> {
  const shot = PNG.sync.read(await page.screenshot({ fullPage: true, mask }));
  if (!existsSync(baseline) || process.env.UPDATE_SCREENSHOTS === '1') {
    await writeFile(baseline, PNG.sync.write(shot));
    if (process.env.UPDATE_SCREENSHOTS !== '1') throw new Error(`no baseline: wrote ${baseline.pathname}; check it and commit it`);
  }
  const base = PNG.sync.read(await readFile(baseline));
  const width = Math.min(base.width, shot.width);
  const height = Math.min(base.height, shot.height);
  const crop = (img: PNG) => {
    const out = new PNG({ width, height });
    PNG.bitblt(img, out, 0, 0, width, height, 0, 0);
    return out.data;
  };
  const differing = pixelmatch(crop(base), crop(shot), undefined, width, height, { threshold: 0.3 });
  const extra = base.width * base.height + shot.width * shot.height - 2 * width * height;
  const ratio = (differing + extra) / (base.width * base.height);
  expect(ratio, `${((differing + extra) / 1000).toFixed(1)}k pixels differ`).toBeLessThan(0.03);
}
