// What every job handler receives besides its payload. Built by the worker runtime.
import type { Config } from '../src/config.js';
import type { Pool } from '../src/db/pool.js';
import type { MailTransport } from '../src/mail/transport.js';
import type { ReminderService } from '../src/queue/reminder-service.js';

export interface JobContext {
  config: Config;
  pool: Pool;
  mail: MailTransport;
  reminders: ReminderService;
  /** Counts an email by kind and outcome (metrics). */
  countEmail?(kind: string, outcome: 'sent' | 'failed' | 'skipped'): void;
  /** Records how late a reminder fired against its planned slot (metrics). */
  observeReminderLateness?(seconds: number): void;
}
