// Shows that each promise of the SubscriptionManager is held by its guard and caught by the
// invariant tests: removes (or breaks) one guard at a time in contracts/SubscriptionManager.sol,
// runs forge's invariant suite against that mutant, prints which invariants failed, and restores
// the source. Every mutant must be caught (exit 1 otherwise). Run by hand (a few minutes):
// `npm run contracts:mutants`, optionally with mutant names to run only those.
import { spawnSync } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const source = path.join(root, 'contracts/SubscriptionManager.sol');
const failures = path.join(root, 'var/forge/invariant-failures');

/** name -> [the guard as written, what the mutant has instead] */
const MUTANTS = {
  'no operator check': [
    '        if (operator != msg.sender) {\n            if (operator == address(0)) revert UnknownSubscription(id);\n            revert NotOperator(id, msg.sender);\n        }',
    '        if (operator == address(0)) revert UnknownSubscription(id);',
  ],
  'no one-charge-per-period check': ['        if (periodIndex <= lastCharged) revert PeriodAlreadyCharged(id, periodIndex, lastCharged);', ''],
  'charged period not stored': ['        s.lastChargedPeriod = periodIndex;', ''],
  'no canceled check': ['        if (s.canceled) revert SubscriptionCanceled(id);', ''],
  'no end check': ['        if (endsAt != 0 && block.timestamp >= endsAt) revert SubscriptionEnded(id, endsAt);', ''],
  'no period-begun check': ['        if (block.timestamp < beginsAt) revert PeriodNotBegun(id, periodIndex, beginsAt);', ''],
  'anyone may cancel': [
    '        if (msg.sender != subscriber && msg.sender != s.payee && msg.sender != s.operator) {',
    '        if (msg.sender == address(0)) {',
  ],
  'fee kept by the contract': [
    'if (fee != 0) token.safeTransferFrom(from, feeAddress, fee);',
    'if (fee != 0) token.safeTransferFrom(from, address(this), fee);',
  ],
  'payee paid the whole amount': ['token.safeTransferFrom(from, payee, amount - fee);', 'token.safeTransferFrom(from, payee, amount);'],
};

const only = process.argv.slice(2);
const original = readFileSync(source, 'utf8');
let survivors = 0;
const restore = () => writeFileSync(source, original);
process.on('SIGINT', () => {
  restore();
  process.exit(130);
});
try {
  for (const [name, [guard, mutant]] of Object.entries(MUTANTS)) {
    if (only.length > 0 && !only.includes(name)) continue;
    if (!original.includes(guard)) throw new Error(`mutant "${name}": its guard is no longer in the source; update this script`);
    writeFileSync(source, original.replace(guard, mutant));
    // A failure forge persisted for one mutant would be replayed against the next.
    rmSync(failures, { recursive: true, force: true });
    const run = spawnSync(process.execPath, [path.join(root, 'scripts/forge.mjs'), 'test', '--match-contract', 'Invariant'], { cwd: root, encoding: 'utf8' });
    const out = `${run.stdout}${run.stderr}`;
    const failed = [...new Set([...out.matchAll(/"invariant":"(invariant_\w+)"/g)].map((m) => m[1]))].sort();
    if (failed.length === 0) survivors++;
    console.log(`${name}: ${failed.length > 0 ? `caught by ${failed.join(', ')}` : `NOT CAUGHT (forge exit ${run.status})`}`);
  }
} finally {
  restore();
  rmSync(failures, { recursive: true, force: true });
}
process.exit(survivors === 0 ? 0 : 1);
