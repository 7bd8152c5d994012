-- Lists page by insertion order. created_at has microseconds that an API timestamp (ms) loses,
-- so a cursor built from it could repeat rows; a sequence number cannot.
ALTER TABLE instances ADD COLUMN seq bigserial;
CREATE UNIQUE INDEX instances_seq ON instances (seq);
CREATE INDEX instances_state_seq ON instances (state, seq);
DROP INDEX instances_page;
DROP INDEX instances_state;
