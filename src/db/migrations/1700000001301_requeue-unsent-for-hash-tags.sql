-- Up Migration
-- Queue keys now carry a hash tag (`bull:{invoice-send}:invoice-send:...`, Redis Cluster's rule),
-- so a deployment upgrading with sends still waiting in the old, untagged keys would never see
-- them again. Hand those sends to the outbox relay once more: it adds them to the new queue
-- (the job id makes a second add a no-op) and the delivery row lock keeps any email from going
-- out twice. Reminder schedulers and due-date jobs need nothing: the reconciler rebuilds them
-- from Postgres, as after any Redis loss. On a fresh database this changes no row.
update outbox o
   set enqueued_at = null
 where o.job_name = 'invoice.send'
   and o.enqueued_at is not null
   and exists (
     select 1 from deliveries d
      where d.id = o.payload->>'deliveryId' and d.status in ('pending', 'retrying')
   );

-- Down Migration
-- Nothing to undo: re-relaying a send is idempotent.
