-- A VMM of a host declared lost is `lost` at once; fenced_at records when its host's agent,
-- heard from again, confirmed it killed the process. Until then the host cannot be re-admitted.
ALTER TABLE vmms ADD COLUMN fenced_at timestamptz;
CREATE INDEX vmms_unfenced_lost ON vmms (host_id) WHERE state = 'lost' AND fenced_at IS NULL;
