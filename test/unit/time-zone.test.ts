// The time zone rule: valid names in their IANA spelling, the merchant's choice of name kept.
import { describe, expect, it } from 'vitest';
import { canonicalTimeZone } from '../../src/domain/time-zone.js';

describe('canonicalTimeZone', () => {
  it('puts the case right', () => {
    expect(canonicalTimeZone('europe/paris')).toBe('Europe/Paris');
    expect(canonicalTimeZone('AMERICA/NEW_YORK')).toBe('America/New_York');
    expect(canonicalTimeZone('america/port-au-prince')).toBe('America/Port-au-Prince');
    expect(canonicalTimeZone('utc')).toBe('UTC');
  });

  it("keeps IANA's current names, which the runtime's data may spell the old way", () => {
    expect(canonicalTimeZone('Asia/Kolkata')).toBe('Asia/Kolkata');
    expect(canonicalTimeZone('asia/kolkata')).toBe('Asia/Kolkata');
    expect(canonicalTimeZone('Europe/Kyiv')).toBe('Europe/Kyiv');
    expect(canonicalTimeZone('America/Argentina/Buenos_Aires')).toBe('America/Argentina/Buenos_Aires');
  });

  it('keeps a link the merchant chose', () => {
    expect(canonicalTimeZone('asia/calcutta')).toBe('Asia/Calcutta');
    expect(canonicalTimeZone('Europe/Oslo')).toBe('Europe/Oslo');
  });

  it('refuses what is no time zone', () => {
    for (const zone of ['Europe/Parys', 'Mars/Olympus_Mons', '', '+02:00', 'Europe/Paris ']) expect(canonicalTimeZone(zone)).toBeNull();
  });
});
