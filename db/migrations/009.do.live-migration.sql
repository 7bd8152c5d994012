-- Live migration and host drain (issue 17).

ALTER TABLE instances DROP CONSTRAINT instances_state_check;
ALTER TABLE instances ADD CONSTRAINT instances_state_check
  CHECK (state IN ('creating', 'starting', 'running', 'stopping', 'stopped', 'rebooting', 'migrating', 'failed', 'destroyed'));

ALTER TABLE operations DROP CONSTRAINT operations_kind_check;
ALTER TABLE operations ADD CONSTRAINT operations_kind_check
  CHECK (kind IN ('create', 'start', 'stop', 'reboot', 'delete', 'migrate'));

-- A VMM's half of a live migration, as its own agent reports it (domain/vmm.ts VmmMigration):
-- with the VMM's state and generation, each side's state and generation.
ALTER TABLE vmms ADD COLUMN migration jsonb;

-- A live migration of an instance, keyed by its migrate operation's ID. The control plane's
-- phase moves only forward; the instance's active VMM becomes the target in the same
-- transaction that records `committed` (the commit point), never at any other time.
CREATE TABLE migrations (
  id                  uuid PRIMARY KEY,
  instance_id         uuid NOT NULL REFERENCES instances (id),
  source_vmm_id       uuid NOT NULL REFERENCES vmms (id),
  source_host_id      text NOT NULL REFERENCES hosts (id),
  target_vmm_id       uuid REFERENCES vmms (id),
  target_host_id      text REFERENCES hosts (id),
  -- The host the request named, if it named one.
  requested_host_id   text,
  phase               text NOT NULL CHECK (phase IN ('reserving', 'preparing', 'sending', 'committed', 'succeeded', 'failed', 'cancelled', 'aborted')),
  reason              text,
  cancel_requested_at timestamptz,
  started_at          timestamptz NOT NULL DEFAULT now(),
  committed_at        timestamptz,
  finished_at         timestamptz,
  updated_at          timestamptz NOT NULL DEFAULT now(),
  CHECK ((finished_at IS NULL) = (phase IN ('reserving', 'preparing', 'sending', 'committed')))
);
-- One migration at a time per instance.
CREATE UNIQUE INDEX migrations_one_live ON migrations (instance_id) WHERE finished_at IS NULL;
CREATE INDEX migrations_instance ON migrations (instance_id, started_at);

-- A cordoned host takes no new VMM; a drain cordons its host and migrates its instances away.
ALTER TABLE hosts ADD COLUMN cordoned_at timestamptz;
ALTER TABLE hosts ADD COLUMN cordon_reason text;

CREATE TABLE drains (
  id          uuid PRIMARY KEY,
  host_id     text NOT NULL REFERENCES hosts (id),
  -- drained: no instance runs on the host any more; stopped: uncordoned before that; failed:
  -- instances whose migrations kept failing are still there.
  status      text NOT NULL CHECK (status IN ('draining', 'drained', 'stopped', 'failed')),
  -- Running instances found on the host, migrated off it, and whose migrations kept failing.
  total       integer NOT NULL DEFAULT 0,
  migrated    integer NOT NULL DEFAULT 0,
  failed      integer NOT NULL DEFAULT 0,
  last_error  text,
  started_at  timestamptz NOT NULL DEFAULT now(),
  finished_at timestamptz,
  CHECK ((finished_at IS NULL) = (status = 'draining'))
);
CREATE UNIQUE INDEX drains_one_live ON drains (host_id) WHERE finished_at IS NULL;
