// The job of each kind of email delivery, as the reconciler finds it from the delivery alone
// (handUnsentAgain in src/db/outbox.ts builds its id in SQL): the catalogue must agree.
import { describe, expect, it } from 'vitest';
import { DELIVERY_KINDS } from '../../src/domain/delivery-kinds.js';
import { EMAIL_JOB_OF_DELIVERY, JOBS, jobIdOf, type JobPayloads } from '../../src/queue/catalogue.js';

describe('the job of each kind of email delivery', () => {
  it('has the id <job>-<invoice>-<delivery> and comes from the outbox', () => {
    for (const name of Object.values(EMAIL_JOB_OF_DELIVERY)) {
      const payload = { invoiceId: 'inv_X1', deliveryId: 'dlv_Y2', paymentId: 'pay_Z3', remainingAtomic: '1' } as unknown as JobPayloads[typeof name];
      expect(jobIdOf(name, payload), name).toBe(`${name}-inv_X1-dlv_Y2`);
      expect(JOBS[name].producedBy, name).toBe('outbox');
    }
  });

  it('is named for every kind but the reminders, which their schedulers send', () => {
    expect(Object.keys(EMAIL_JOB_OF_DELIVERY).sort()).toEqual(DELIVERY_KINDS.filter((k) => !k.startsWith('reminder_')).sort());
  });
});
