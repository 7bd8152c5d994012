#!/bin/sh
# Run by the postgres image once, when its data directory is first made: Temporal's databases
# belong to a role of their own, as the dev stack's cluster shape has them
# (stack/temporal-schemas.ts). The temporal-schema job fills them.
set -eu
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" <<SQL
CREATE ROLE temporal LOGIN PASSWORD '${TEMPORAL_DB_PASSWORD}';
CREATE DATABASE temporal OWNER temporal;
CREATE DATABASE temporal_visibility OWNER temporal;
SQL
