-- Auto-restart (restart_policy 'on-failure'): how many restarts in a row the current backoff
-- counts, and when the next one is due while the instance waits in `failed`.
ALTER TABLE instances ADD COLUMN restart_attempts integer NOT NULL DEFAULT 0;
ALTER TABLE instances ADD COLUMN restart_at timestamptz;
-- When a VMM first ran: a failure after long enough running starts the backoff over.
ALTER TABLE vmms ADD COLUMN running_since timestamptz;
-- When calls to a host's agent started failing (refused, timing out, 5xx), while its heartbeats may
-- still arrive: the control plane cannot reach it either way. Cleared by the next call that works.
ALTER TABLE hosts ADD COLUMN contact_failing_since timestamptz;
-- Whether the instances on the host were told (in their events) that contact has been failing
-- for the unreachable threshold; they are told again when it works.
ALTER TABLE hosts ADD COLUMN contact_failure_noted boolean NOT NULL DEFAULT false;
