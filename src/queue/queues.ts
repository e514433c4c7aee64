// Opens every queue of the catalogue with the settings it needs. API and worker processes both
// open queues here, so a queue can never be created without them (the reminder queue must carry
// the custom repeat strategy in every process that upserts its schedulers).
import type { AppQueue, QueueBackend } from './backend.js';
import { QUEUES, type QueueName, type QueueRole } from './catalogue.js';
import { reminderSchedulerSettings } from './reminder-schedulers.js';

/** Every queue of the catalogue, by role. */
export type QueueSet = { readonly [R in QueueRole]: AppQueue };

const SETTINGS: Partial<Record<QueueRole, AppQueue['opts']['settings']>> = {
  reminders: reminderSchedulerSettings,
};

/** Every catalogue queue on the process's queue backend (Redis or Postgres, see backend.ts). */
export function openQueues(backend: QueueBackend, onError: (err: Error, queue: QueueName) => void): QueueSet {
  const entries = (Object.keys(QUEUES) as QueueRole[]).map((role) => {
    const settings = SETTINGS[role];
    const queue = backend.queue(QUEUES[role], settings ? { settings } : {});
    queue.on('error', (err) => onError(err, QUEUES[role]));
    return [role, queue] as const;
  });
  return Object.fromEntries(entries) as Record<QueueRole, AppQueue>;
}

/** The queue of a catalogue queue name. */
export function queueNamed(queues: QueueSet, name: QueueName): AppQueue {
  const role = (Object.keys(QUEUES) as QueueRole[]).find((r) => QUEUES[r] === name);
  if (role === undefined) throw new Error(`queue ${name} is not in the catalogue`);
  return queues[role];
}

export function allQueues(queues: QueueSet): AppQueue[] {
  return Object.values(queues);
}
