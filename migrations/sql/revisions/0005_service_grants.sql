-- The application role: the outbox and the attempt log are insert-only (the history triggers
-- write events as the role that inserts the history row); endpoints and deliveries change state.
REVOKE ALL ON webhook_endpoints, outbox_events, webhook_deliveries, webhook_attempts FROM PUBLIC;
GRANT SELECT, INSERT ON outbox_events, webhook_attempts TO custody_app;
GRANT SELECT, INSERT, UPDATE ON webhook_endpoints, webhook_deliveries TO custody_app;
GRANT USAGE, SELECT ON SEQUENCE webhook_endpoints_id_seq, outbox_events_id_seq,
  webhook_deliveries_id_seq, webhook_attempts_id_seq TO custody_app;
REVOKE ALL ON job_runs FROM PUBLIC;
GRANT SELECT, INSERT, DELETE ON job_runs TO custody_app;
GRANT USAGE, SELECT ON SEQUENCE job_runs_id_seq TO custody_app;
