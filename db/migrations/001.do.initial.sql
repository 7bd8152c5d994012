-- vmplane's schema. PostgreSQL is the record users read; the instance's workflow is its only
-- writer of runtime state (DESIGN.md §3, I4).

CREATE TABLE hosts (
  id                text PRIMARY KEY,
  agent_url         text NOT NULL,
  vcpus             integer NOT NULL CHECK (vcpus > 0),
  memory_mib        integer NOT NULL CHECK (memory_mib > 0),
  status            text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'unreachable', 'lost')),
  status_since      timestamptz NOT NULL DEFAULT now(),
  last_heartbeat_at timestamptz,
  agent_started_at  timestamptz,
  registered_at     timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE instances (
  id                 uuid PRIMARY KEY,
  name               text NOT NULL,
  vcpus              integer NOT NULL,
  memory_mib         integer NOT NULL,
  boot               jsonb NOT NULL,
  stop_grace_seconds integer NOT NULL,
  restart_policy     text NOT NULL DEFAULT 'never' CHECK (restart_policy IN ('never', 'on-failure')),
  state              text NOT NULL CHECK (state IN ('creating', 'starting', 'running', 'stopping', 'stopped', 'rebooting', 'failed', 'destroyed')),
  intended_state     text NOT NULL CHECK (intended_state IN ('running', 'stopped', 'destroyed')),
  active_vmm_id      uuid,
  generation         bigint NOT NULL DEFAULT 1,
  last_error         jsonb,
  created_at         timestamptz NOT NULL DEFAULT now(),
  updated_at         timestamptz NOT NULL DEFAULT now(),
  destroyed_at       timestamptz
);
-- Names are unique among live instances; a destroyed instance frees its name.
CREATE UNIQUE INDEX instances_live_name ON instances (name) WHERE destroyed_at IS NULL;
-- The list endpoint pages by (created_at, id).
CREATE INDEX instances_page ON instances (created_at, id);
CREATE INDEX instances_state ON instances (state, created_at, id);

CREATE TABLE vmms (
  id              uuid PRIMARY KEY,
  instance_id     uuid NOT NULL REFERENCES instances (id),
  host_id         text NOT NULL REFERENCES hosts (id),
  state           text NOT NULL CHECK (state IN ('starting', 'running', 'rebooting', 'stopping', 'destroyed', 'failed', 'lost')),
  -- The generation of the last host report applied; reports at or below it are stale.
  generation      bigint NOT NULL DEFAULT 0,
  reason          text,
  exit            jsonb,
  unresponsive_since timestamptz,
  created_at      timestamptz NOT NULL DEFAULT now(),
  updated_at      timestamptz NOT NULL DEFAULT now(),
  destroyed_at    timestamptz
);
CREATE INDEX vmms_instance ON vmms (instance_id);
CREATE INDEX vmms_live_by_host ON vmms (host_id) WHERE state NOT IN ('destroyed', 'failed', 'lost');

ALTER TABLE instances ADD CONSTRAINT instances_active_vmm FOREIGN KEY (active_vmm_id) REFERENCES vmms (id);

-- Capacity held on a host for one VMM, keyed by the VMM's ID (I3): placing the same VMM twice
-- finds its reservation instead of taking a second one.
CREATE TABLE reservations (
  vmm_id     uuid PRIMARY KEY REFERENCES vmms (id),
  host_id    text NOT NULL REFERENCES hosts (id),
  vcpus      integer NOT NULL,
  memory_mib integer NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX reservations_host ON reservations (host_id);

CREATE TABLE operations (
  id          uuid PRIMARY KEY,
  instance_id uuid NOT NULL REFERENCES instances (id),
  kind        text NOT NULL CHECK (kind IN ('create', 'start', 'stop', 'reboot', 'delete')),
  status      text NOT NULL CHECK (status IN ('running', 'succeeded', 'failed', 'superseded')),
  params      jsonb NOT NULL DEFAULT '{}',
  error       jsonb,
  workflow_id text NOT NULL,
  run_id      text,
  started_at  timestamptz NOT NULL DEFAULT now(),
  finished_at timestamptz
);
CREATE INDEX operations_in_flight ON operations (instance_id) WHERE finished_at IS NULL;
CREATE INDEX operations_by_instance ON operations (instance_id, started_at);

-- The user-visible history of an instance: every state change and its reason. Event IDs are
-- chosen by the workflow, so an activity retried after a crash writes each event once.
CREATE TABLE instance_events (
  id           uuid PRIMARY KEY,
  seq          bigserial NOT NULL UNIQUE,
  instance_id  uuid NOT NULL REFERENCES instances (id),
  at           timestamptz NOT NULL DEFAULT now(),
  kind         text NOT NULL,
  state        text,
  operation_id uuid,
  vmm_id       uuid,
  message      text NOT NULL,
  details      jsonb
);
CREATE INDEX instance_events_by_instance ON instance_events (instance_id, seq DESC);
