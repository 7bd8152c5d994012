-- An Idempotency-Key is claimed when its first request begins, before anything is done: a row
-- with no answer yet (status NULL). A second request with the key while the first is in progress
-- is refused with 409 (draft-ietf-httpapi-idempotency-key-header), instead of racing it. A claim
-- lasts as long as its request may be held (claimed_until); one whose request died with its API
-- process, or could not give the claim back, is taken over after that, or at once by the API
-- process that made it (claimed_by) once that process no longer runs the request.
ALTER TABLE idempotency_keys
  ALTER COLUMN status DROP NOT NULL,
  ALTER COLUMN content_type DROP NOT NULL,
  ALTER COLUMN response DROP NOT NULL,
  ADD COLUMN claimed_until timestamptz,
  ADD COLUMN claimed_by uuid;
