-- An Idempotency-Key is claimed when its first request begins, before anything is done: a row
-- with no answer yet (status NULL). A second request with the key while the first is in progress
-- is refused with 409 (draft-ietf-httpapi-idempotency-key-header), instead of racing it. A claim
-- whose request died with its API process is taken over once it is older than any request can
-- be held (claimed_at).
ALTER TABLE idempotency_keys
  ALTER COLUMN status DROP NOT NULL,
  ALTER COLUMN content_type DROP NOT NULL,
  ALTER COLUMN response DROP NOT NULL,
  ADD COLUMN claimed_at timestamptz NOT NULL DEFAULT now();
