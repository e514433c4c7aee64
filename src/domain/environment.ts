/** The two environments of an account: every object, key and event belongs to one. */
export const ENVIRONMENTS = ['sandbox', 'live'] as const;
export type Environment = (typeof ENVIRONMENTS)[number];
/** What an API key may do. */
export const PERMISSIONS = ['full', 'read_only'] as const;
export type Permission = (typeof PERMISSIONS)[number];

/** The fixed service marker of API keys: `sp_sandbox_...`, `sp_live_...` (the spec's `xx`). */
export const KEY_MARKER = 'sp';

export function environmentOfKey(key: string): Environment | null {
  if (key.startsWith(`${KEY_MARKER}_sandbox_`)) return 'sandbox';
  if (key.startsWith(`${KEY_MARKER}_live_`)) return 'live';
  return null;
}
