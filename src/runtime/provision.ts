// Creates a merchant account with keys for both environments. Used by `npm run demo` and by
// operators bootstrapping a merchant; the API has no account sign-up of its own.
import { issueApiKey } from '../db/credentials.js';
import { setSettlementAddress, upsertAccount } from '../db/accounts.js';
import type { Queryable } from '../db/pool.js';
import type { Environment, Permission } from '../domain/environment.js';

export interface MerchantKeys {
  sandbox: string;
  live: string;
  sandbox_read_only: string;
  live_read_only: string;
}

export async function provisionMerchant(
  db: Queryable,
  account: {
    id: string;
    name: string;
    email: string | null;
    timeZone?: string;
    platformFeeBps?: number;
    keyNamePrefix?: string;
    /** Where payments go in both environments, unless the account already has one (checksummed). */
    settlementAddress?: string;
  },
  /** What an account gets when not told otherwise: PLATFORM_FEE_BPS and REMINDERS_DEFAULT_TIME_ZONE. */
  defaults: { platformFeeBps: number; timeZone: string } = { platformFeeBps: 50, timeZone: 'UTC' },
): Promise<{ accountId: string; keys: MerchantKeys }> {
  await upsertAccount(db, {
    id: account.id,
    name: account.name,
    email: account.email,
    time_zone: account.timeZone ?? defaults.timeZone,
    platform_fee_bps: account.platformFeeBps ?? defaults.platformFeeBps,
  });
  if (account.settlementAddress) {
    for (const environment of ['sandbox', 'live'] as const) {
      await setSettlementAddress(db, { accountId: account.id, environment }, account.settlementAddress, true);
    }
  }
  const issue = async (environment: Environment, permission: Permission, name: string) =>
    (await issueApiKey(db, { accountId: account.id, environment }, `${account.keyNamePrefix ?? ''}${name}`, permission)).secret;
  return {
    accountId: account.id,
    keys: {
      sandbox: await issue('sandbox', 'full', 'default sandbox key'),
      live: await issue('live', 'full', 'default live key'),
      sandbox_read_only: await issue('sandbox', 'read_only', 'read-only sandbox key'),
      live_read_only: await issue('live', 'read_only', 'read-only live key'),
    },
  };
}
