import calculateSlot from 'cluster-key-slot';
import { describe, expect, it } from 'vitest';
import {
  jumpHash,
  reminderShardOf,
  reminderShardQueue,
  reminderShardSlot,
  reminderShardTag,
  shardOfQueueName,
} from '../../src/queue/reminder-shards.js';

const ids = Array.from({ length: 20_000 }, (_, i) => `inv_${i.toString(36).padStart(8, '0')}`);
/** The master owning a slot when n masters own equal contiguous ranges (redis-cli --cluster create). */
const masterOf = (slot: number, masters: number) => Math.floor((slot * masters) / 16_384);

describe('reminder shards', () => {
  it('puts an invoice on the same shard every time, spread evenly', () => {
    for (const id of ids.slice(0, 100)) expect(reminderShardOf(id, 12)).toBe(reminderShardOf(id, 12));
    const counts = new Array(12).fill(0);
    for (const id of ids) counts[reminderShardOf(id, 12)]++;
    for (const c of counts) expect(Math.abs(c - ids.length / 12)).toBeLessThan(ids.length / 12 * 0.1);
    expect(ids.every((id) => reminderShardOf(id, 1) === 0)).toBe(true);
  });

  it('moves only the invoices that must move when the count changes', () => {
    const moved = (from: number, to: number) => ids.filter((id) => reminderShardOf(id, from) !== reminderShardOf(id, to));
    // Growing 12 -> 16: a quarter moves, and only to the new shards.
    const grown = moved(12, 16);
    expect(Math.abs(grown.length / ids.length - 0.25)).toBeLessThan(0.02);
    expect(grown.every((id) => reminderShardOf(id, 16) >= 12)).toBe(true);
    // Shrinking 16 -> 12: only the invoices of the removed shards move.
    expect(moved(16, 12).every((id) => reminderShardOf(id, 16) >= 12)).toBe(true);
  });

  it('jumpHash stays in range and refuses an empty range', () => {
    for (let k = 0n; k < 200n; k++) {
      const b = jumpHash(k * 0x9e3779b97f4a7c15n, 7);
      expect(b >= 0 && b < 7).toBe(true);
    }
    expect(() => jumpHash(1n, 0)).toThrow(RangeError);
  });

  it('gives each shard a hash tag of its own, stable whatever the count', () => {
    const tags = Array.from({ length: 48 }, (_, i) => reminderShardTag(i));
    expect(new Set(tags).size).toBe(48);
    for (const [i, tag] of tags.entries()) {
      expect(tag.startsWith(reminderShardQueue(i))).toBe(true);
      expect(calculateSlot(`{${tag}}:x`)).toBe(reminderShardSlot(i));
    }
  });

  it('spreads 12 shards 4/4/4 over 3 masters, and evenly over 2, 4 and 6', () => {
    const spread = (shards: number, masters: number) => {
      const per = new Array(masters).fill(0);
      for (let i = 0; i < shards; i++) per[masterOf(reminderShardSlot(i), masters)]++;
      return per;
    };
    expect(spread(12, 3)).toEqual([4, 4, 4]);
    expect(spread(24, 3)).toEqual([8, 8, 8]);
    expect(spread(12, 2)).toEqual([6, 6]);
    for (const masters of [4, 6]) {
      const per = spread(12, masters);
      expect(Math.max(...per) - Math.min(...per)).toBeLessThanOrEqual(1);
    }
  });

  it('reads a shard index back from its queue name', () => {
    expect(shardOfQueueName(reminderShardQueue(7))).toBe(7);
    expect(shardOfQueueName('invoice-send')).toBeNull();
  });
});
