// A real browser for the payment page tests: Debian's chromium driven by playwright-core. Tests
// skip, saying what to install, where there is none (`.ci/run` installs it).
import { execFileSync } from 'node:child_process';
import { chromium, type Browser } from 'playwright-core';

/** Path of the chromium binary (`which chromium`), or null when it is not installed. */
export function chromiumPath(): string | null {
  try {
    return execFileSync('which', ['chromium'], { encoding: 'utf8' }).trim() || null;
  } catch {
    return null;
  }
}

export const NO_CHROMIUM = 'skipped: no chromium installed (apt-get install -y chromium)';

export async function launchChromium(executablePath: string): Promise<Browser> {
  return chromium.launch({
    executablePath,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
}
