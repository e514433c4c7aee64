// This process's view of the reminder shards: its own count (REMINDER_SHARDS), the counts other
// live processes use, and every shard still to be read and consumed (reminder-placement.ts).
// Refreshed by a heartbeat every RECONCILE_EVERY; Postgres holds the membership, so a Redis loss
// forgets nothing about it.
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import { forgetShardMembers, heartbeatShardMember, leaveShardMember, listShardMembers, type ShardMember } from '../db/reminder-shard-members.js';
import type { Queryable } from '../db/pool.js';
import type { ReminderQueues } from './queues.js';
import { layoutFrom, type ShardLayout } from './reminder-placement.js';

export interface ReminderShardSet {
  readonly queues: ReminderQueues;
  readonly memberId: string;
  /** A member not seen for this long is stale. */
  readonly staleAfterMs: number;
  /** The layout as of the last refresh (own count only, before the first). */
  layout(): ShardLayout;
  /** Members as of the last refresh. */
  members(): ShardMember[];
  /** Heartbeat, then reads the members; opens the queues of every consumed shard. Keeps the last layout if Postgres fails. */
  refresh(): Promise<ShardLayout>;
  forget(memberIds: string[]): Promise<number>;
  /** Clean shutdown: this member goes stale at once. */
  leave(): Promise<void>;
}

export function createReminderShardSet(db: Queryable, queues: ReminderQueues, own: number, reconcileEveryMs: number): ReminderShardSet {
  const memberId = `${os.hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`;
  // Three missed heartbeats, and never less than 30 s: a busy process is not a gone one.
  const staleAfterMs = Math.max(3 * reconcileEveryMs, 30_000);
  let members: ShardMember[] = [];
  let layout = layoutFrom(own, []);
  const openConsumed = () => {
    for (let i = 0; i < layout.consumed; i++) queues.shard(i);
  };
  openConsumed();
  return {
    queues,
    memberId,
    staleAfterMs,
    layout: () => layout,
    members: () => members,
    async refresh() {
      await heartbeatShardMember(db, memberId, own);
      members = await listShardMembers(db, staleAfterMs);
      layout = layoutFrom(own, members);
      openConsumed();
      return layout;
    },
    forget: (ids) => forgetShardMembers(db, ids, staleAfterMs),
    leave: () => leaveShardMember(db, memberId),
  };
}
