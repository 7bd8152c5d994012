-- Networks that isolate (docs/design.md §19): each network is a segment of its own on every host
-- that has one of its interfaces, a bridge and a VXLAN device named after its VNI. The VNI is
-- chosen with the network, before any device is made, and never handed out again: a device left
-- behind by a deleted network can never be mistaken for a new network's.
CREATE SEQUENCE network_vnis AS integer MINVALUE 4096 MAXVALUE 16777215 NO CYCLE;
-- A volatile default gives each existing network a VNI of its own.
ALTER TABLE networks ADD COLUMN vni integer NOT NULL DEFAULT nextval('network_vnis');
ALTER SEQUENCE network_vnis OWNED BY networks.vni;
CREATE UNIQUE INDEX networks_vni ON networks (vni);
