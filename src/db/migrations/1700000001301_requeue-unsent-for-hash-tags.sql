-- Up Migration
-- Queue keys now carry a hash tag (`bull:{invoice-send}:invoice-send:...`, Redis Cluster's rule),
-- so a deployment upgrading with jobs still waiting in the old, untagged keys would never see
-- them again. Hand the outbox jobs whose work is not done yet to the outbox relay once more: it
-- adds them to the new queues (the job id makes a second add a no-op), and every handler is
-- idempotent: the delivery row lock keeps an email from going out twice, a webhook delivery that
-- is no longer pending is not sent again. Reminder schedulers and due-date jobs need nothing: the
-- reconciler rebuilds them from Postgres, as after any Redis loss. On a fresh database (or on the
-- Postgres queue backend, whose queues have no keys) this changes no row or hands over jobs that
-- are already there.
--
-- Invoice and receipt emails not yet delivered.
update outbox o
   set enqueued_at = null
 where o.job_name in ('invoice.send', 'invoice.receipt')
   and o.enqueued_at is not null
   and exists (
     select 1 from deliveries d
      where d.id = o.payload->>'deliveryId' and d.status in ('pending', 'retrying')
   );

-- Webhook fan-outs of events not fanned out yet, or with a delivery still pending: the fan-out
-- adds the delivery jobs (webhook.deliver is added by the fan-out, not through the outbox), and
-- creates no delivery row twice.
update outbox o
   set enqueued_at = null
 where o.job_name = 'webhook.fanout'
   and o.enqueued_at is not null
   and exists (select 1 from events e where e.id = o.payload->>'eventId')
   and (
     not exists (select 1 from webhook_deliveries w where w.event_id = o.payload->>'eventId')
     or exists (select 1 from webhook_deliveries w where w.event_id = o.payload->>'eventId' and w.status = 'pending')
   );

-- Down Migration
-- Nothing to undo: re-relaying a job is idempotent.
