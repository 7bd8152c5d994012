-- The term of a host's last grant, as the API that granted it counted it. The worker judges a
-- host's lease by the longest term it knows of, its own or any a grant recorded: an API configured
-- with a longer term than the worker's must never have the worker declare a host lost while its
-- agent still holds a lease granted for that longer term.
ALTER TABLE hosts ADD COLUMN lease_term_ms integer;
