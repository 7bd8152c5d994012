-- Real VMs (issue 16): networks, interfaces with addresses, disks, cloud-init, base images.

-- A network is an IPv4 address space with its gateway. Live networks never overlap.
CREATE TABLE networks (
  id         uuid PRIMARY KEY,
  name       text NOT NULL,
  cidr       cidr NOT NULL CHECK (family(cidr) = 4),
  gateway    inet NOT NULL CHECK (gateway << cidr),
  created_at timestamptz NOT NULL DEFAULT now(),
  deleted_at timestamptz,
  CONSTRAINT networks_no_overlap EXCLUDE USING gist (cidr inet_ops WITH &&) WHERE (deleted_at IS NULL)
);
CREATE UNIQUE INDEX networks_live_name ON networks (name) WHERE deleted_at IS NULL;

-- An instance's network interface, keyed by its ID (the MAC and the TAP's name derive from it).
-- An address and a MAC belong to one live interface at a time; both are released only when the
-- instance is destroyed, which is recorded only once its VMMs are confirmed gone.
CREATE TABLE interfaces (
  id          uuid PRIMARY KEY,
  instance_id uuid NOT NULL REFERENCES instances (id),
  network_id  uuid NOT NULL REFERENCES networks (id),
  slot        smallint NOT NULL,
  ip          inet NOT NULL,
  mac         macaddr NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  released_at timestamptz
);
CREATE UNIQUE INDEX interfaces_live_ip ON interfaces (network_id, ip) WHERE released_at IS NULL;
CREATE UNIQUE INDEX interfaces_live_mac ON interfaces (mac) WHERE released_at IS NULL;
CREATE INDEX interfaces_instance ON interfaces (instance_id, slot);

-- An instance's disk, keyed by its ID (its file in the shared storage is named by it). Its size
-- is held against the storage's capacity until it is destroyed, after the instance is deleted
-- and its VMMs are gone. made_at: when a VMM of the instance first ran with it.
CREATE TABLE disks (
  id           uuid PRIMARY KEY,
  instance_id  uuid NOT NULL REFERENCES instances (id),
  name         text NOT NULL,
  slot         smallint NOT NULL,
  image        text,
  image_sha256 text,
  size_gib     integer NOT NULL CHECK (size_gib > 0),
  created_at   timestamptz NOT NULL DEFAULT now(),
  made_at      timestamptz,
  destroyed_at timestamptz
);
CREATE UNIQUE INDEX disks_live_name ON disks (instance_id, name) WHERE destroyed_at IS NULL;
CREATE INDEX disks_instance ON disks (instance_id, slot);

-- What cloud-init gets: {sshKeys, userData?}; null for an instance without a boot disk.
ALTER TABLE instances ADD COLUMN cloud_init jsonb;

-- What each host announces in its heartbeats: the capacity of the shared storage it mounts, and
-- its base images (replaced when their digest changes).
ALTER TABLE hosts ADD COLUMN storage_gib integer;
ALTER TABLE hosts ADD COLUMN images_digest text;
CREATE TABLE host_images (
  host_id            text NOT NULL REFERENCES hosts (id),
  name               text NOT NULL,
  format             text NOT NULL CHECK (format IN ('raw', 'qcow2')),
  virtual_size_bytes bigint NOT NULL,
  sha256             text NOT NULL,
  PRIMARY KEY (host_id, name)
);
CREATE INDEX host_images_by_name ON host_images (name, sha256);
