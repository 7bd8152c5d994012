-- Whoever finishes an operation (its workflow, or the reconciler closing one that was
-- interrupted) tells listeners at commit, so a request held by ?wait= answers at once instead of
-- at its next poll. The payload is the operation's ID.
CREATE FUNCTION notify_operation_finished() RETURNS trigger AS $$
BEGIN
  IF NEW.finished_at IS NOT NULL AND (TG_OP = 'INSERT' OR OLD.finished_at IS NULL) THEN
    PERFORM pg_notify('operation_finished', NEW.id::text);
  END IF;
  RETURN NULL;
END
$$ LANGUAGE plpgsql;

CREATE TRIGGER operation_finished AFTER INSERT OR UPDATE OF finished_at ON operations
  FOR EACH ROW EXECUTE FUNCTION notify_operation_finished();
