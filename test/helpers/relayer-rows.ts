// The relayer's records as the chain sees them: a round records its transactions together before
// broadcasting the first, and when it stops early the ones it never broadcast are closed `failed`
// (src/chain/relayer.ts, closeUnsent). Those never reached a node; a test of the nonce sequence
// leaves them out, after checking that they are exactly that.
import { expect } from 'vitest';
import { NEVER_BROADCAST, type RelayerTransactionRow } from '../../src/db/relayer-transactions.js';

export function withoutUnsent(rows: readonly RelayerTransactionRow[]): RelayerTransactionRow[] {
  const unsent = rows.filter((x) => x.error === NEVER_BROADCAST);
  for (const x of unsent) expect(x).toMatchObject({ status: 'failed', broadcasts: 0 });
  return rows.filter((x) => x.error !== NEVER_BROADCAST);
}
