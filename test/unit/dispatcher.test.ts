// The dispatcher's one log line per outcome: a job polled every few seconds says "job completed"
// at debug, every other job at info (issue 25: chain.watch flooded the info log).
import { Writable } from 'node:stream';
import type { Job } from 'bullmq';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { createProcessor } from '../../src/queue/dispatcher.js';

function capture() {
  const lines: { level: number; msg: string; job_name?: string }[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString().split('\n').filter(Boolean)) lines.push(JSON.parse(line) as { level: number; msg: string });
      done();
    },
  });
  return { log: pino({ level: 'debug' }, stream), lines };
}

const job = (name: string) => ({ id: `${name}-1`, name, data: {}, attemptsMade: 0, timestamp: Date.now(), opts: {}, queueName: 'q' }) as unknown as Job;

describe('createProcessor', () => {
  it('logs a completed chain.watch at debug and a completed invoice.send at info', async () => {
    const { log, lines } = capture();
    const processor = createProcessor({ 'chain.watch': async () => 'scanned', 'invoice.send': async () => 'sent' }, {}, log);
    await processor(job('chain.watch'));
    await processor(job('invoice.send'));
    const completed = lines.filter((l) => l.msg === 'job completed').map((l) => [l.job_name, l.level]);
    expect(completed).toEqual([
      ['chain.watch', pino.levels.values.debug],
      ['invoice.send', pino.levels.values.info],
    ]);
  });
});
