-- The instance list's pages without a state (db/instance-views.ts) show the instances not
-- destroyed, in insertion order. Destroyed instances stay in the table (their events and
-- operations are still read), and with `instances_seq` alone a page read every destroyed row
-- between its cursor and its last live one and dropped it: with 2,000 destroyed ahead of the live
-- ones, the first page read 2,101 rows for its 100 (test/db/instance-pages.test.ts), a cost that
-- grew with every delete ever made. This index holds the live ones only.
CREATE INDEX instances_live_seq ON instances (seq) WHERE destroyed_at IS NULL;
