// Time zone names as merchants give them: valid when the runtime's time zone data knows them,
// stored in their IANA spelling. The name a merchant chose is kept (a link such as Asia/Calcutta
// stays itself; Europe/Kyiv does not become the runtime's older Europe/Kiev): only its case is
// put right ("europe/paris" -> "Europe/Paris"), from the IANA list of zones and their links.
// A name outside that list (UTC, Etc/GMT+5, EST5EDT...) takes the runtime's spelling.
import { rawTimeZones } from '@vvo/tzdb';

const IANA_SPELLING: ReadonlyMap<string, string> = new Map(
  rawTimeZones.flatMap((zone) => [zone.name, ...zone.group]).map((name) => [name.toLowerCase(), name]),
);

/** The zone's IANA spelling, or null when it is no time zone this runtime can format dates in. */
export function canonicalTimeZone(zone: string): string | null {
  let resolved: string;
  try {
    resolved = new Intl.DateTimeFormat('en-US', { timeZone: zone }).resolvedOptions().timeZone;
  } catch {
    return null;
  }
  return IANA_SPELLING.get(zone.toLowerCase()) ?? resolved;
}
