-- The application role: clients, users and the audit trail are insert-only; a key may be
-- revoked; idempotency records and rate counters are updated and cleaned up.
REVOKE ALL ON api_clients, api_keys, api_users, api_idempotency, api_audit, api_rate_windows
  FROM PUBLIC;
GRANT SELECT, INSERT ON api_clients, api_users, api_audit TO custody_app;
GRANT SELECT, INSERT, UPDATE ON api_keys TO custody_app;
GRANT SELECT, INSERT, UPDATE, DELETE ON api_idempotency, api_rate_windows TO custody_app;
GRANT USAGE, SELECT ON SEQUENCE api_clients_id_seq, api_keys_id_seq, api_audit_id_seq
  TO custody_app;
