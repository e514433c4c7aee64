// The subscription contract is part of what a chain cursor was scanned for (src/domain/chains.ts):
// a cursor scanned before it was watched is taken over by a worker that reads it; a worker without
// it, or with another, may not move a cursor that read it.
import { describe, expect, it } from 'vitest';
import { compareScannedFor, describeScannedForDifference, type ScannedFor } from '../../src/domain/chains.js';

const base: ScannedFor = { environment: 'sandbox', fee_proxy: '0xaa', fee_address: '0xbb', tokens: ['0xcc'] };
const M = '0x' + '11'.repeat(20);

describe('the subscription manager in the scanned-for set', () => {
  it('same when both read the same contract; wider when the cursor never read one', () => {
    expect(compareScannedFor({ ...base, subscription_manager: M }, { ...base, subscription_manager: M })).toBe('same');
    expect(compareScannedFor(base, { ...base, subscription_manager: null })).toBe('same');
    expect(compareScannedFor(base, { ...base, subscription_manager: M })).toBe('wider');
  });

  it('other when the worker reads none or another: it would skip the cursor’s logs', () => {
    expect(compareScannedFor({ ...base, subscription_manager: M }, { ...base, subscription_manager: null })).toBe('other');
    expect(compareScannedFor({ ...base, subscription_manager: M }, { ...base, subscription_manager: '0x' + '22'.repeat(20) })).toBe('other');
    expect(describeScannedForDifference({ ...base, subscription_manager: M }, base)).toBe(`subscription manager ${M} (this worker: none)`);
  });
});
