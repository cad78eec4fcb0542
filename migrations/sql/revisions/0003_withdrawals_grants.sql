-- The application role: SELECT and INSERT on the append-only withdrawal tables; UPDATE only on
-- the two current-state tables (a withdrawal's state, a hot wallet's next nonce).
REVOKE ALL ON withdrawals, withdrawal_events, withdrawal_attempts, withdrawal_decisions,
  withdrawal_returns, hot_wallet_nonces FROM PUBLIC;
GRANT SELECT, INSERT ON withdrawal_events, withdrawal_attempts, withdrawal_decisions,
  withdrawal_returns TO custody_app;
GRANT SELECT, INSERT, UPDATE ON withdrawals, hot_wallet_nonces TO custody_app;
GRANT USAGE, SELECT ON SEQUENCE withdrawals_id_seq, withdrawal_events_id_seq,
  withdrawal_attempts_id_seq, withdrawal_decisions_id_seq, withdrawal_returns_id_seq
  TO custody_app;
