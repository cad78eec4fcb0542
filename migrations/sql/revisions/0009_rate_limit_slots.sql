-- Rate-limit counters per database session (api.ratelimit.HIT_SQL): one row per key, window
-- and session (slot = the backend's pid), summed at each request, so that concurrent requests
-- of one key never queue on one row's lock. The table stays UNLOGGED (counters, not money).
ALTER TABLE api_rate_windows ADD COLUMN slot integer NOT NULL DEFAULT 0;
ALTER TABLE api_rate_windows DROP CONSTRAINT api_rate_windows_pkey;
ALTER TABLE api_rate_windows ADD PRIMARY KEY (key_id, window_start, slot);
COMMENT ON TABLE api_rate_windows IS
  'Fixed-window request counters per API key: a row per database session, summed per request.';
