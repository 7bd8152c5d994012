-- A network's way out to the hosts' LAN (docs/design.md §19): none, or NAT by the host of each
-- interface. Chosen when the network is made.
ALTER TABLE networks ADD COLUMN outbound text NOT NULL DEFAULT 'none' CHECK (outbound IN ('none', 'nat'));
