// The payment page's wallet script (src/page/wallet/pay.ts) as the API serves it: one file, viem
// bundled in, named by its content's hash so it can be cached for a year. `npm run build` bundles
// it into dist/ beside this module (scripts/build.mjs calls writeWalletScript); run from source
// (`npm start` via tsx) where no bundle exists, it is bundled in memory with the same options at
// the first page that needs it. esbuild is a devDependency: a built image never loads it.
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export interface WalletScript {
  /** `pay.<16 hex of its SHA-256>.js`. */
  name: string;
  body: string;
}

const WALLET_DIR = fileURLToPath(new URL('./wallet/', import.meta.url));
const BUILT_NAME = /^pay\.[0-9a-f]{16}\.js$/;

/** Bundles the browser entry point (pay.ts) with viem into one minified IIFE. */
export async function bundleWalletScript(entry = path.join(WALLET_DIR, 'pay.ts')): Promise<WalletScript> {
  const { build } = await import('esbuild');
  const out = await build({
    entryPoints: [entry],
    bundle: true,
    format: 'iife',
    platform: 'browser',
    // BigInt literals (viem's amounts) need ES2020.
    target: ['es2020'],
    minify: true,
    legalComments: 'none',
    write: false,
    logLevel: 'silent',
  });
  const body = out.outputFiles[0].text;
  return { name: `pay.${createHash('sha256').update(body).digest('hex').slice(0, 16)}.js`, body };
}

/** The build step: bundles `entry` into `outDir` under its hashed name. */
export async function writeWalletScript(entry: string, outDir: string): Promise<string> {
  const script = await bundleWalletScript(entry);
  writeFileSync(path.join(outDir, script.name), script.body);
  return script.name;
}

function builtWalletScript(): WalletScript | null {
  let names: string[];
  try {
    names = readdirSync(WALLET_DIR).filter((n) => BUILT_NAME.test(n));
  } catch {
    return null;
  }
  if (names.length !== 1) return null;
  return { name: names[0], body: readFileSync(path.join(WALLET_DIR, names[0]), 'utf8') };
}

let loading: Promise<WalletScript> | null = null;

/** The script to serve: the built one, else bundled once per process (then shared by every app it serves). */
export function walletScript(): Promise<WalletScript> {
  if (!loading) {
    const built = builtWalletScript();
    loading = built ? Promise.resolve(built) : bundleWalletScript();
    // A failed bundle is retried by the next page rather than remembered.
    loading.catch(() => {
      loading = null;
    });
  }
  return loading;
}
