// A raw-limit child process of bench:send (run by raw-limits.ts, one core each): prints its figures
// as one JSON line.
//   --raw-pdf <document.json> [seconds=6] [warm-up renders=30] [min renders=50]
//   --raw-mail <document.json> <smtp url> [messages=2000]
import { rawMail, rawPdf } from './raw-limits.js';

const [mode, ...args] = process.argv.slice(2);
if (mode === '--raw-pdf') {
  const r = await rawPdf(args[0], Number(args[1] ?? 6), Number(args[2] ?? 30), Number(args[3] ?? 50));
  process.stdout.write(`${JSON.stringify(r)}\n`);
} else if (mode === '--raw-mail') {
  const r = await rawMail(args[0], args[1], Number(args[2] ?? 2000));
  process.stdout.write(`${JSON.stringify(r)}\n`);
} else {
  throw new Error(`usage: raw-child.ts --raw-pdf <document.json> [seconds] [warm] [min renders] | --raw-mail <document.json> <smtp url> [messages], got "${mode}"`);
}
