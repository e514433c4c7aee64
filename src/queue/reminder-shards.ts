// Where an invoice's reminders live: one of REMINDER_SHARDS queues, each with a hash tag of its
// own, so that on a Redis Cluster the reminder load spreads over the masters instead of pinning
// one queue (one slot) to one node. Pure functions; no I/O.
//
// - The shard of an invoice is a jump consistent hash of its id (Lamping & Veach): stable, even,
//   and when the count changes from n to m only the invoices that must move do (|m - n| / max).
// - A shard's hash tag depends on its index only, never on the count, so growing or shrinking
//   keeps every other shard where it is. Tags are chosen so that shards spread evenly over the
//   slot space: shard i targets the third (i mod 3) of the slots and, inside it, the
//   bit-reversed position of floor(i / 3). With the masters owning equal contiguous ranges (what
//   `redis-cli --cluster create` does), any multiple of 3 shards puts the same number on each of
//   3 masters, and close to it on 2, 4 or 6.
import { createHash } from 'node:crypto';
import calculateSlot from 'cluster-key-slot';
import { QUEUES } from './catalogue.js';

/** The reminder role's queue name is the shards' base: `invoice-reminders-<i>`. */
export const REMINDER_QUEUE_BASE = QUEUES.reminders;
export const MAX_REMINDER_SHARDS = 1024;
const SLOTS = 16_384;
/** Width of the slot window a shard's tag must land in. */
const WINDOW = 64;

/** Queue name of shard i: `invoice-reminders-0`, `invoice-reminders-1`, ... */
export function reminderShardQueue(shard: number): string {
  return `${REMINDER_QUEUE_BASE}-${shard}`;
}

const SHARD_QUEUE_RE = new RegExp(`^${REMINDER_QUEUE_BASE}-(\\d+)$`);

/** The shard index of a queue name, or null when it is not a reminder shard. */
export function shardOfQueueName(name: string): number | null {
  const m = SHARD_QUEUE_RE.exec(name);
  return m ? Number(m[1]) : null;
}

/** 64 bits of the invoice id (SHA-1's first 8 bytes): the key of the jump hash. */
function key64(id: string): bigint {
  return createHash('sha1').update(id).digest().readBigUInt64BE(0);
}

const MASK64 = (1n << 64n) - 1n;

/** Jump consistent hash: a bucket in [0, buckets) for a 64-bit key. */
export function jumpHash(key: bigint, buckets: number): number {
  if (!Number.isInteger(buckets) || buckets < 1) throw new RangeError(`buckets must be a positive integer, got ${buckets}`);
  let b = -1;
  let j = 0;
  let k = key & MASK64;
  while (j < buckets) {
    b = j;
    k = (k * 2862933555777941757n + 1n) & MASK64;
    j = Math.floor(((b + 1) * 2 ** 31) / (Number(k >> 33n) + 1));
  }
  return b;
}

/** The shard of an invoice's reminders among `shards` queues. */
export function reminderShardOf(invoiceId: string, shards: number): number {
  return shards === 1 ? 0 : jumpHash(key64(invoiceId), shards);
}

/** Bit reversal of j as a fraction in [0, 1): 0, 1/2, 1/4, 3/4, 1/8, 5/8, ... */
function vanDerCorput(j: number): number {
  let x = 0;
  let f = 0.5;
  for (let n = j; n > 0; n >>= 1, f /= 2) if (n & 1) x += f;
  return x;
}

/** The first slot of the window shard i's tag must land in. */
export function targetSlot(shard: number): number {
  const third = shard % 3;
  const within = (vanDerCorput(Math.floor(shard / 3)) + 1 / 8) % 1;
  return Math.min(SLOTS - WINDOW, Math.floor(((third + within) / 3) * SLOTS));
}

const tags = new Map<number, string>();

/**
 * The hash tag of shard i: its queue name, with the smallest `~k` suffix that makes its slot
 * fall in the shard's window. Deterministic: every process computes the same tag.
 */
export function reminderShardTag(shard: number): string {
  const known = tags.get(shard);
  if (known !== undefined) return known;
  const from = targetSlot(shard);
  const name = reminderShardQueue(shard);
  for (let k = 0; ; k++) {
    const tag = k === 0 ? name : `${name}~${k}`;
    const slot = calculateSlot(tag);
    if (slot >= from && slot < from + WINDOW) {
      tags.set(shard, tag);
      return tag;
    }
  }
}

/** The hash slot of shard i's keys. */
export function reminderShardSlot(shard: number): number {
  return calculateSlot(reminderShardTag(shard));
}
