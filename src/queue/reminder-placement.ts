// Which reminder shards are in use, and where an invoice's scheduler may be, while the shard
// count changes. Pure functions over the membership rows (src/db/reminder-shard-members.ts).
//
// Changing REMINDER_SHARDS is a rolling operation: processes with the old and the new count run
// side by side for a while. Rules that keep it safe:
// - every count with a LIVE member is honoured: a scheduler in the invoice's shard under any
//   live count is in place, so two reconcilers with different counts never move a scheduler back
//   and forth;
// - every KNOWN count (live or stale) is looked at: the cancel path removes the scheduler from the
//   invoice's shard under each of them, the reconciler reads and workers consume every shard up
//   to the largest known count;
// - a scheduler in place under no live count is moved to the reconciling process's count: the new
//   one is created first (from the slot after the last one recorded), then the old one removed;
//   a slot that both fire in that instant is sent once (deliveries are unique per slot);
// - a stale member is forgotten once the shards only its count used are empty.
import { reminderShardOf } from './reminder-shards.js';

export interface ShardMemberView {
  member_id: string;
  shards: number;
  live: boolean;
}

export interface ShardLayout {
  /** This process's REMINDER_SHARDS: where it puts new schedulers. */
  own: number;
  /** Counts with a live member, own included, ascending. */
  live: number[];
  /** Counts of every member, live or stale, own included, ascending. */
  known: number[];
  /** Shards 0..consumed-1 are read by the reconciler and consumed by the workers. */
  consumed: number;
}

const distinctSorted = (xs: number[]) => [...new Set(xs)].sort((a, b) => a - b);

export function layoutFrom(own: number, members: ShardMemberView[]): ShardLayout {
  const live = distinctSorted([own, ...members.filter((m) => m.live).map((m) => m.shards)]);
  const known = distinctSorted([own, ...members.map((m) => m.shards)]);
  return { own, live, known, consumed: Math.max(...known) };
}

/** The shards where this invoice's scheduler may be (its shard under every known count). */
export function placementsOf(invoiceId: string, layout: ShardLayout): number[] {
  return distinctSorted(layout.known.map((n) => reminderShardOf(invoiceId, n)));
}

/** Its shard under a live count: leave it there. */
export function inPlace(invoiceId: string, shard: number, layout: ShardLayout): boolean {
  return layout.live.some((n) => reminderShardOf(invoiceId, n) === shard);
}

/**
 * Stale members that can be forgotten now, given which shards still hold anything. A stale
 * count at or below the largest live count is covered by the live shards (its misplaced
 * schedulers are moved by the same reconcile pass); a larger one must wait until its extra
 * shards are empty, or their jobs would no longer be consumed.
 */
export function forgettable(members: ShardMemberView[], layout: ShardLayout, shardHoldsWork: (shard: number) => boolean): string[] {
  const maxLive = Math.max(...layout.live);
  return members
    .filter((m) => !m.live)
    .filter((m) => {
      for (let s = maxLive; s < m.shards; s++) if (shardHoldsWork(s)) return false;
      return true;
    })
    .map((m) => m.member_id);
}
