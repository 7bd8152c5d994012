-- Tenancy (docs/design.md §18): projects own instances and networks; people's tokens, each bound
-- to a project or to the fleet with a role; per-project quotas, charged once per instance; an
-- audit trail of every mutating request.

-- A project: the name paths use (`/v1/projects/{name}/…`), and an ID. `default` holds everything
-- made before projects existed and whatever the deprecated unscoped paths make; its ID is fixed,
-- so that a create recorded before this migration, whose workflow input names no project, lands
-- there when the workflow makes the instance's rows.
CREATE TABLE projects (
  id         uuid PRIMARY KEY,
  name       text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  deleted_at timestamptz
);
CREATE UNIQUE INDEX projects_live_name ON projects (name) WHERE deleted_at IS NULL;
INSERT INTO projects (id, name) VALUES ('00000000-0000-4000-8000-000000000000', 'default');

ALTER TABLE instances ADD COLUMN project_id uuid REFERENCES projects (id);
UPDATE instances SET project_id = '00000000-0000-4000-8000-000000000000';
ALTER TABLE instances ALTER COLUMN project_id SET NOT NULL;
-- Names are unique among a project's live instances.
DROP INDEX instances_live_name;
CREATE UNIQUE INDEX instances_live_name ON instances (project_id, name) WHERE destroyed_at IS NULL;
CREATE INDEX instances_project_live_seq ON instances (project_id, seq) WHERE destroyed_at IS NULL;
CREATE INDEX instances_project_state_seq ON instances (project_id, state, seq);

-- Networks' names are unique in their project. Their address ranges still never overlap across
-- the fleet: every interface is a TAP on its host's one bridge (§14).
ALTER TABLE networks ADD COLUMN project_id uuid REFERENCES projects (id);
UPDATE networks SET project_id = '00000000-0000-4000-8000-000000000000';
ALTER TABLE networks ALTER COLUMN project_id SET NOT NULL;
DROP INDEX networks_live_name;
CREATE UNIQUE INDEX networks_live_name ON networks (project_id, name) WHERE deleted_at IS NULL;

-- A person's or a program's token. The secret is kept only as its scrypt hash, with its salt; the
-- token's ID travels in the token itself, so a request costs one lookup by key. A token is bound
-- to one project with a project role, or to the fleet with a fleet role (domain/access-policy.ts).
-- The environment's tokens (the bootstrap operator, the fleet viewer, the agents') are not here.
CREATE TABLE api_tokens (
  id          uuid PRIMARY KEY,
  name        text NOT NULL,
  secret_salt bytea NOT NULL,
  secret_hash bytea NOT NULL,
  project_id  uuid REFERENCES projects (id),
  role        text NOT NULL,
  created_by  text NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  expires_at  timestamptz NOT NULL,
  revoked_at  timestamptz,
  CONSTRAINT api_tokens_role CHECK (
    (project_id IS NULL AND role IN ('fleet-viewer', 'fleet-operator'))
    OR (project_id IS NOT NULL AND role IN ('viewer', 'collaborator', 'admin')))
);
CREATE INDEX api_tokens_project ON api_tokens (project_id, created_at);

-- A project's quotas (NULL: no limit) and what it uses, in one row: a charge locks it, so two
-- charges of one project are ordered and each sees the other's use.
CREATE TABLE project_quotas (
  project_id       uuid PRIMARY KEY REFERENCES projects (id),
  vcpus            integer CHECK (vcpus >= 0),
  memory_mib       bigint CHECK (memory_mib >= 0),
  disk_gib         integer CHECK (disk_gib >= 0),
  instances        integer CHECK (instances >= 0),
  addresses        integer CHECK (addresses >= 0),
  used_vcpus       integer NOT NULL DEFAULT 0 CHECK (used_vcpus >= 0),
  used_memory_mib  bigint NOT NULL DEFAULT 0 CHECK (used_memory_mib >= 0),
  used_disk_gib    integer NOT NULL DEFAULT 0 CHECK (used_disk_gib >= 0),
  used_instances   integer NOT NULL DEFAULT 0 CHECK (used_instances >= 0),
  used_addresses   integer NOT NULL DEFAULT 0 CHECK (used_addresses >= 0)
);

-- What each live instance is charged, keyed by the instance: charging it again finds its charge,
-- and its release (once the instance is destroyed, its VMMs and disks confirmed gone) happens once.
CREATE TABLE quota_charges (
  instance_id uuid PRIMARY KEY REFERENCES instances (id),
  project_id  uuid NOT NULL REFERENCES projects (id),
  vcpus       integer NOT NULL,
  memory_mib  bigint NOT NULL,
  disk_gib    integer NOT NULL,
  addresses   integer NOT NULL,
  charged_at  timestamptz NOT NULL DEFAULT now()
);

-- The instances already live are charged to `default`, whose quotas start unlimited.
INSERT INTO quota_charges (instance_id, project_id, vcpus, memory_mib, disk_gib, addresses)
SELECT i.id, i.project_id, i.vcpus, i.memory_mib,
       (SELECT COALESCE(sum(size_gib), 0) FROM disks d WHERE d.instance_id = i.id AND d.destroyed_at IS NULL),
       (SELECT count(*) FROM interfaces n WHERE n.instance_id = i.id AND n.released_at IS NULL)
  FROM instances i WHERE i.destroyed_at IS NULL;
INSERT INTO project_quotas (project_id, used_vcpus, used_memory_mib, used_disk_gib, used_instances, used_addresses)
SELECT '00000000-0000-4000-8000-000000000000', COALESCE(sum(vcpus), 0), COALESCE(sum(memory_mib), 0),
       COALESCE(sum(disk_gib), 0), count(*), COALESCE(sum(addresses), 0)
  FROM quota_charges;

-- Every mutating request a token made, and its outcome: who (the token's ID and name, never its
-- secret), what (method, route, path), when, from where, in which project, and the status.
CREATE TABLE audit_events (
  id              bigserial PRIMARY KEY,
  at              timestamptz NOT NULL DEFAULT now(),
  token_id        text NOT NULL,
  token_name      text NOT NULL,
  project_id      uuid REFERENCES projects (id),
  method          text NOT NULL,
  route           text NOT NULL,
  path            text NOT NULL,
  status          integer NOT NULL,
  request_id      text NOT NULL,
  remote_address  text NOT NULL,
  idempotency_key text
);
CREATE INDEX audit_events_project ON audit_events (project_id, id);

-- Idempotency-Keys belong to the token that sent them (its ID); the operator token's were kept
-- under `api`, when it was the only token that could change anything.
UPDATE idempotency_keys SET principal = 'operator' WHERE principal = 'api';
