export type Environment = 'sandbox' | 'live';
export type Permission = 'full' | 'read_only';

/** The fixed service marker of API keys: `sp_sandbox_...`, `sp_live_...` (the spec's `xx`). */
export const KEY_MARKER = 'sp';

export function environmentOfKey(key: string): Environment | null {
  if (key.startsWith(`${KEY_MARKER}_sandbox_`)) return 'sandbox';
  if (key.startsWith(`${KEY_MARKER}_live_`)) return 'live';
  return null;
}
