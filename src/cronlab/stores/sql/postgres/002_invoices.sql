-- The invoice workload. The unique key makes a duplicate execution a no-op (exactly-once
-- effect); `cronlab cluster --no-idempotency` drops it so duplicates become extra rows.
CREATE TABLE invoices (
  id BIGSERIAL PRIMARY KEY,
  customer TEXT NOT NULL,
  period TEXT NOT NULL,
  task_id BIGINT NOT NULL
);
CREATE UNIQUE INDEX invoices_once ON invoices (customer, period);
