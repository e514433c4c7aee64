// Opens every queue of the catalogue with the settings it needs. API and worker processes both
// open queues here, so a queue can never be created without them (the reminder queues must carry
// the custom repeat strategy in every process that upserts their schedulers). Reminders are
// sharded (reminder-shards.ts): their role holds one queue per shard, opened on first use.
import type { AppQueue, QueueBackend } from './backend.js';
import { QUEUES, type QueueName, type QueueRole } from './catalogue.js';
import { reminderSchedulerSettings } from './reminder-schedulers.js';
import { MAX_REMINDER_SHARDS, reminderShardQueue, reminderShardTag } from './reminder-shards.js';

/** The reminder shard queues: `invoice-reminders-<i>`, each under its own hash tag. */
export interface ReminderQueues {
  /** Shard i's queue, opened on first use. */
  shard(i: number): AppQueue;
  /** Every shard queue opened so far, by index. */
  opened(): AppQueue[];
}

type PlainRole = Exclude<QueueRole, 'reminders'>;

/** Every queue of the catalogue, by role. */
export type QueueSet = { readonly [R in PlainRole]: AppQueue } & { readonly reminders: ReminderQueues };

/**
 * Every catalogue queue on the process's queue backend (Redis, Redis Cluster or Postgres, see
 * backend.ts). On Redis each queue's keys carry its hash tag: its name, or the shard's tag.
 */
export function openQueues(backend: QueueBackend, onError: (err: Error, queue: string) => void): QueueSet {
  const open = (name: string, tag: string, settings?: AppQueue['opts']['settings']) => {
    const queue = backend.queue(name, settings ? { settings } : {}, tag);
    queue.on('error', (err) => onError(err, name));
    return queue;
  };
  const plain = (Object.keys(QUEUES) as QueueRole[])
    .filter((role): role is PlainRole => role !== 'reminders')
    .map((role) => [role, open(QUEUES[role], QUEUES[role])] as const);
  const shards = new Map<number, AppQueue>();
  const reminders: ReminderQueues = {
    shard(i) {
      if (!Number.isInteger(i) || i < 0 || i >= MAX_REMINDER_SHARDS) throw new RangeError(`no reminder shard ${i}`);
      let queue = shards.get(i);
      if (!queue) {
        queue = open(reminderShardQueue(i), reminderShardTag(i), reminderSchedulerSettings);
        shards.set(i, queue);
      }
      return queue;
    },
    opened: () => [...shards.entries()].sort(([a], [b]) => a - b).map(([, q]) => q),
  };
  return { ...(Object.fromEntries(plain) as Record<PlainRole, AppQueue>), reminders };
}

/** The queue of a catalogue queue name (not the sharded reminder role: pick its shard). */
export function queueNamed(queues: QueueSet, name: QueueName): AppQueue {
  const role = (Object.keys(QUEUES) as QueueRole[]).find((r) => QUEUES[r] === name);
  if (role === undefined) throw new Error(`queue ${name} is not in the catalogue`);
  if (role === 'reminders') throw new Error('the reminder queues are sharded: use queues.reminders.shard(i)');
  return queues[role];
}

/** Every queue opened so far: the plain ones, then the reminder shards. */
export function allQueues(queues: QueueSet): AppQueue[] {
  const { reminders, ...plain } = queues;
  return [...Object.values(plain), ...reminders.opened()];
}
