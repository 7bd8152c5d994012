-- Firewall rules (docs/design.md §19), security-group style: each allows traffic into (ingress)
-- or out of (egress) every instance of a network, or one instance, by protocol and ports, from or
-- to a peer of the same project: an address range, a network or an instance. What no rule allows
-- into an instance from outside its network is dropped; what it sends is free until an egress
-- rule applies to it. A rule linking two networks makes the hosts of each route to the other.
CREATE TABLE firewall_rules (
  id               uuid PRIMARY KEY,
  project_id       uuid NOT NULL REFERENCES projects (id),
  network_id       uuid REFERENCES networks (id),
  instance_id      uuid REFERENCES instances (id),
  direction        text NOT NULL CHECK (direction IN ('ingress', 'egress')),
  protocol         text NOT NULL CHECK (protocol IN ('tcp', 'udp', 'icmp', 'any')),
  port_from        integer CHECK (port_from BETWEEN 1 AND 65535),
  port_to          integer CHECK (port_to BETWEEN 1 AND 65535),
  peer_cidr        cidr CHECK (family(peer_cidr) = 4),
  peer_network_id  uuid REFERENCES networks (id),
  peer_instance_id uuid REFERENCES instances (id),
  description      text NOT NULL DEFAULT '',
  created_at       timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT firewall_rules_one_target CHECK (num_nonnulls(network_id, instance_id) = 1),
  CONSTRAINT firewall_rules_one_peer CHECK (num_nonnulls(peer_cidr, peer_network_id, peer_instance_id) = 1),
  CONSTRAINT firewall_rules_ports CHECK ((port_from IS NULL) = (port_to IS NULL) AND port_from <= port_to
    AND (port_from IS NULL OR protocol IN ('tcp', 'udp')))
);
CREATE INDEX firewall_rules_project ON firewall_rules (project_id, created_at, id);
CREATE INDEX firewall_rules_network ON firewall_rules (network_id) WHERE network_id IS NOT NULL;
CREATE INDEX firewall_rules_instance ON firewall_rules (instance_id) WHERE instance_id IS NOT NULL;
CREATE INDEX firewall_rules_peer_network ON firewall_rules (peer_network_id) WHERE peer_network_id IS NOT NULL;
CREATE INDEX firewall_rules_peer_instance ON firewall_rules (peer_instance_id) WHERE peer_instance_id IS NOT NULL;

-- Every change of the rules takes the next generation in its own transaction, so changes are
-- serialised and a reader sees a generation with the rules it names: an agent keeps the newest
-- rule set it was sent for a VMM, whichever call arrives last.
CREATE TABLE firewall_generation (
  only_row   boolean PRIMARY KEY DEFAULT true CHECK (only_row),
  generation bigint NOT NULL
);
INSERT INTO firewall_generation (generation) VALUES (1);
