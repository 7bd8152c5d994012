-- The API's rate limits (api/plugins/rate-limit-store.ts): one row per key (a token's role),
-- counting its requests in the current fixed window. Every API replica counts in the same row, so
-- the budget is the deployment's, not each process's. A window that has passed is overwritten by
-- the key's next request, so nothing accumulates and nothing needs sweeping. UNLOGGED: a counter
-- is written on every request and worth no WAL; after a crash the table comes back empty, which
-- only gives every token a fresh window.
CREATE UNLOGGED TABLE rate_limit_windows (
  key             text PRIMARY KEY,
  window_start_ms bigint NOT NULL,
  hits            integer NOT NULL
);
