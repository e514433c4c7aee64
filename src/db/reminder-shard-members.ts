// SQL of the reminder shard membership (migration 1700000001300): which shard counts are in use.
import type { Queryable } from './pool.js';

export interface ShardMember {
  member_id: string;
  shards: number;
  /** Seen within the staleness window (by the database's clock). */
  live: boolean;
}

/** Records (or refreshes) this process's shard count. */
export async function heartbeatShardMember(db: Queryable, memberId: string, shards: number): Promise<void> {
  await db.query({
    name: 'shard-member-heartbeat',
    text: `insert into reminder_shard_members (member_id, shards) values ($1, $2)
           on conflict (member_id) do update set shards = excluded.shards, seen_at = now()`,
    values: [memberId, shards],
  });
}

export async function listShardMembers(db: Queryable, staleAfterMs: number): Promise<ShardMember[]> {
  const { rows } = await db.query<ShardMember>({
    name: 'shard-members',
    text: `select member_id, shards, seen_at > now() - make_interval(secs => $1::float8 / 1000) as live
           from reminder_shard_members order by member_id`,
    values: [staleAfterMs],
  });
  return rows;
}

/** Forgets stale members, but only those still stale now (one that came back keeps its row). */
export async function forgetShardMembers(db: Queryable, memberIds: string[], staleAfterMs: number): Promise<number> {
  if (memberIds.length === 0) return 0;
  const { rowCount } = await db.query({
    name: 'shard-members-forget',
    text: `delete from reminder_shard_members
           where member_id = any($1) and seen_at <= now() - make_interval(secs => $2::float8 / 1000)`,
    values: [memberIds, staleAfterMs],
  });
  return rowCount ?? 0;
}

/** A process that stops cleanly: its row goes stale at once (kept until its shards are drained). */
export async function leaveShardMember(db: Queryable, memberId: string): Promise<void> {
  await db.query({ name: 'shard-member-leave', text: `update reminder_shard_members set seen_at = '-infinity' where member_id = $1`, values: [memberId] });
}
