-- Host leases (docs/design.md §17; the rules in domain/host-lease.ts). Each host's row records,
-- on PostgreSQL's clock, its agent's last grant (acknowledged or not), the last it acknowledged,
-- and, from its acknowledgements, since when and until when the agent surely holds its lease
-- without a break;
-- and the timeout of the watchdog the agent announced it pets (NULL: it keeps no lease, and the
-- host is never declared lost by itself). A lost host says who declared it, an operator or the
-- lease's bound passing, and why; one its lease declared is taken back once it is heard again
-- and its fenced VMMs are gone.
ALTER TABLE hosts ADD COLUMN lease_granted_at timestamptz;
ALTER TABLE hosts ADD COLUMN lease_acked_grant_at timestamptz;
ALTER TABLE hosts ADD COLUMN lease_held_since timestamptz;
ALTER TABLE hosts ADD COLUMN lease_holds_until timestamptz;
ALTER TABLE hosts ADD COLUMN lease_watchdog_ms integer;
ALTER TABLE hosts ADD COLUMN lost_by text CHECK (lost_by IN ('operator', 'lease'));
ALTER TABLE hosts ADD COLUMN lost_reason text;

-- What an instance does when its host is declared lost (domain/instance.ts HOST_FAILURE_POLICIES).
ALTER TABLE instances ADD COLUMN on_host_failure text NOT NULL DEFAULT 'fail' CHECK (on_host_failure IN ('fail', 'restart'));

-- The control plane's own liveness, as its grants show it: the last grant to any host, and since
-- when grants have come without a gap of half a term (after an outage, every lease counts from
-- then). One row.
CREATE TABLE lease_clock (
  id            boolean PRIMARY KEY DEFAULT true CHECK (id),
  last_grant_at timestamptz NOT NULL,
  up_since      timestamptz NOT NULL
);
