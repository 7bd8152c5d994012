-- Idempotency-Key: the first answer to a mutating request, replayed to the same request with the
-- same key; another request with the key is refused (422). Kept for a day.
CREATE TABLE idempotency_keys (
  principal    text NOT NULL,
  key          text NOT NULL,
  request_hash text NOT NULL,
  status       integer NOT NULL,
  content_type text NOT NULL,
  response     jsonb NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (principal, key)
);
CREATE INDEX idempotency_keys_age ON idempotency_keys (created_at);

-- What each pass of the reconciler found and did, for operators.
CREATE TABLE reconcile_passes (
  id          uuid PRIMARY KEY,
  started_at  timestamptz NOT NULL,
  finished_at timestamptz NOT NULL DEFAULT now(),
  counts      jsonb NOT NULL,
  actions     jsonb NOT NULL
);
CREATE INDEX reconcile_passes_recent ON reconcile_passes (started_at DESC);
