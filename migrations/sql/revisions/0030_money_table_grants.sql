-- The database refuses what the service refuses (issue 19). Until this revision custody_app,
-- the role every engine session runs as, could INSERT a withdrawal row of its own making or
-- UPDATE any withdrawal's state (and the same for sweeps, gas top-ups, cold transfers and
-- refill requests): a bug or an injected statement could skip the reserve or the state
-- machine. Now:
--
-- * custody_app keeps SELECT on these tables and loses INSERT and UPDATE (and, being the
--   table owner's grants, never had DELETE/TRUNCATE).
-- * A withdrawal is inserted only by withdrawal_reserve_record (SECURITY DEFINER, owner
--   custody_withdrawal_writer: it checks the reserve posting), and moved only by
--   withdrawal_transition; a movement (sweep, gas top-up, cold transfer) or a refill request
--   is inserted only by movement_insert and moved only by movement_transition. These run as
--   custody_state_writer (SECURITY DEFINER, search_path fixed to public, pg_temp), which may
--   write these tables; each checks, under the row lock, that the row is in the state the
--   caller read and that (machine, from, event, to) is a move of the service's state machine
--   (state_moves below, which tests/migrations/test_money_grants.py keeps equal to
--   withdrawals.model.TRANSITIONS and sweeps.model.TRANSITIONS), sets only the columns a
--   transition may set, and appends the history row in the same statement.
-- * custody_state_writer is a member of custody_app (so the triggers that its writes fire,
--   running as it, have the application's rights: outbox events, deliveries, reference checks)
--   and holds INSERT/UPDATE on the money tables besides; custody_app is not a member of it.
-- * Left as they were, on purpose: the history tables (append-only, guarded by their triggers;
--   a history row alone moves nothing), treasury_fundings (a declaration with no state: it
--   moves no money until a deposit matches it, and the match is a row of
--   treasury_funding_matches that the deposit processor writes in the deposit's transaction).

DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'custody_state_writer') THEN
    CREATE ROLE custody_state_writer NOLOGIN;
  END IF;
  -- A non-superuser owner must be a member to hand the functions over (ALTER ... OWNER TO).
  IF NOT (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
    EXECUTE format('GRANT custody_state_writer TO %I', current_user);
  END IF;
END
$$;
GRANT custody_app TO custody_state_writer;

-- The moves of the service's state machines: (machine, from_state, event, to_state); a NULL
-- from_state is a creation ('planned' for movements, 'opened' for refill requests).
CREATE TABLE state_moves (
  machine text NOT NULL CHECK (machine IN ('withdrawal', 'sweep', 'gas_top_up', 'cold_transfer',
                                           'refill_request')),
  from_state text,
  event text NOT NULL,
  to_state text NOT NULL
);
CREATE UNIQUE INDEX state_moves_key ON state_moves (machine, coalesce(from_state, ''), event,
                                                    to_state);
REVOKE ALL ON state_moves FROM PUBLIC;
GRANT SELECT ON state_moves TO custody_app;

INSERT INTO state_moves (machine, from_state, event, to_state) VALUES
  ('withdrawal', 'requested', 'reserve_posted', 'reserved'),
  ('withdrawal', 'requested', 'approval_required', 'pending_approval'),
  ('withdrawal', 'pending_approval', 'approval_recorded', 'pending_approval'),
  ('withdrawal', 'pending_approval', 'approvals_completed', 'reserved'),
  ('withdrawal', 'pending_approval', 'rejected', 'rejected'),
  ('withdrawal', 'reserved', 'rejected', 'rejected'),
  ('withdrawal', 'pending_approval', 'canceled', 'canceled'),
  ('withdrawal', 'reserved', 'canceled', 'canceled'),
  ('withdrawal', 'reserved', 'nonce_assigned', 'signing'),
  ('withdrawal', 'signing', 'attempt_signed', 'signed'),
  ('withdrawal', 'unknown', 'attempt_signed', 'signed'),
  ('withdrawal', 'broadcast', 'attempt_signed', 'signed'),
  ('withdrawal', 'signed', 'send_accepted', 'broadcast'),
  ('withdrawal', 'signed', 'send_unconfirmed', 'unknown'),
  ('withdrawal', 'signed', 'receipt_observed', 'included'),
  ('withdrawal', 'broadcast', 'receipt_observed', 'included'),
  ('withdrawal', 'unknown', 'receipt_observed', 'included'),
  ('withdrawal', 'awaiting_write_off', 'receipt_observed', 'included'),
  ('withdrawal', 'included', 'reorged_out', 'broadcast'),
  ('withdrawal', 'unknown', 'found_pending', 'broadcast'),
  ('withdrawal', 'awaiting_write_off', 'found_pending', 'broadcast'),
  ('withdrawal', 'broadcast', 'not_found', 'unknown'),
  ('withdrawal', 'included', 'final_succeeded', 'settled'),
  ('withdrawal', 'included', 'final_reverted', 'reverted'),
  ('withdrawal', 'unknown', 'proven_not_sent', 'released'),
  ('withdrawal', 'unknown', 'escalated', 'awaiting_write_off'),
  ('withdrawal', 'awaiting_write_off', 'write_off_voted', 'awaiting_write_off'),
  ('withdrawal', 'awaiting_write_off', 'written_off_as_sent', 'written_off'),
  ('withdrawal', 'awaiting_write_off', 'written_off_as_not_sent', 'written_off'),
  ('withdrawal', 'settled', 'return_linked', 'settled'),
  ('withdrawal', 'written_off', 'closing_signed', 'written_off'),
  ('withdrawal', 'written_off', 'nonce_closed', 'written_off'),
  ('withdrawal', 'reserved', 'gas_float_low', 'reserved'),
  ('withdrawal', 'included', 'settlement_held', 'held'),
  ('withdrawal', 'held', 'hold_lifted', 'included'),
  ('sweep', NULL, 'planned', 'proposed'),
  ('sweep', NULL, 'planned', 'ready'),
  ('sweep', NULL, 'planned', 'waiting_gas'),
  ('sweep', 'waiting_gas', 'top_up_planned', 'waiting_gas'),
  ('sweep', 'waiting_gas', 'gas_arrived', 'ready'),
  ('sweep', 'waiting_gas', 'top_up_failed', 'waiting_gas'),
  ('sweep', 'ready', 'nonce_assigned', 'signing'),
  ('sweep', 'signing', 'attempt_signed', 'signed'),
  ('sweep', 'signed', 'send_accepted', 'broadcast'),
  ('sweep', 'signed', 'send_unconfirmed', 'unknown'),
  ('sweep', 'broadcast', 'attempt_signed', 'signed'),
  ('sweep', 'unknown', 'attempt_signed', 'signed'),
  ('sweep', 'broadcast', 'not_found', 'unknown'),
  ('sweep', 'unknown', 'found_pending', 'broadcast'),
  ('sweep', 'signed', 'receipt_observed', 'included'),
  ('sweep', 'broadcast', 'receipt_observed', 'included'),
  ('sweep', 'unknown', 'receipt_observed', 'included'),
  ('sweep', 'included', 'reorged_out', 'broadcast'),
  ('sweep', 'included', 'final_succeeded', 'final'),
  ('sweep', 'included', 'final_reverted', 'reverted'),
  ('sweep', 'broadcast', 'consumed_elsewhere', 'dropped'),
  ('sweep', 'unknown', 'consumed_elsewhere', 'dropped'),
  ('sweep', 'signed', 'consumed_elsewhere', 'dropped'),
  ('gas_top_up', NULL, 'planned', 'ready'),
  ('gas_top_up', 'ready', 'nonce_assigned', 'signing'),
  ('gas_top_up', 'signing', 'attempt_signed', 'signed'),
  ('gas_top_up', 'signed', 'send_accepted', 'broadcast'),
  ('gas_top_up', 'signed', 'send_unconfirmed', 'unknown'),
  ('gas_top_up', 'broadcast', 'attempt_signed', 'signed'),
  ('gas_top_up', 'unknown', 'attempt_signed', 'signed'),
  ('gas_top_up', 'broadcast', 'not_found', 'unknown'),
  ('gas_top_up', 'unknown', 'found_pending', 'broadcast'),
  ('gas_top_up', 'signed', 'receipt_observed', 'included'),
  ('gas_top_up', 'broadcast', 'receipt_observed', 'included'),
  ('gas_top_up', 'unknown', 'receipt_observed', 'included'),
  ('gas_top_up', 'included', 'reorged_out', 'broadcast'),
  ('gas_top_up', 'included', 'final_succeeded', 'final'),
  ('gas_top_up', 'included', 'final_reverted', 'reverted'),
  ('gas_top_up', 'broadcast', 'consumed_elsewhere', 'dropped'),
  ('gas_top_up', 'unknown', 'consumed_elsewhere', 'dropped'),
  ('gas_top_up', 'signed', 'consumed_elsewhere', 'dropped'),
  ('cold_transfer', NULL, 'planned', 'proposed'),
  ('cold_transfer', 'proposed', 'approval_recorded', 'proposed'),
  ('cold_transfer', 'proposed', 'approved', 'approved'),
  ('cold_transfer', 'proposed', 'rejected', 'rejected'),
  ('cold_transfer', 'approved', 'nonce_assigned', 'signing'),
  ('cold_transfer', 'signing', 'attempt_signed', 'signed'),
  ('cold_transfer', 'signed', 'send_accepted', 'broadcast'),
  ('cold_transfer', 'signed', 'send_unconfirmed', 'unknown'),
  ('cold_transfer', 'broadcast', 'attempt_signed', 'signed'),
  ('cold_transfer', 'unknown', 'attempt_signed', 'signed'),
  ('cold_transfer', 'broadcast', 'not_found', 'unknown'),
  ('cold_transfer', 'unknown', 'found_pending', 'broadcast'),
  ('cold_transfer', 'signed', 'receipt_observed', 'included'),
  ('cold_transfer', 'broadcast', 'receipt_observed', 'included'),
  ('cold_transfer', 'unknown', 'receipt_observed', 'included'),
  ('cold_transfer', 'included', 'reorged_out', 'broadcast'),
  ('cold_transfer', 'included', 'final_succeeded', 'final'),
  ('cold_transfer', 'included', 'final_reverted', 'reverted'),
  ('cold_transfer', 'broadcast', 'consumed_elsewhere', 'dropped'),
  ('cold_transfer', 'unknown', 'consumed_elsewhere', 'dropped'),
  ('cold_transfer', 'signed', 'consumed_elsewhere', 'dropped'),
  ('refill_request', NULL, 'opened', 'open'),
  ('refill_request', 'open', 'matched', 'matched');

REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON withdrawals, sweeps, gas_top_ups, cold_transfers,
  refill_requests FROM custody_app;
GRANT SELECT, INSERT, UPDATE ON withdrawals, sweeps, gas_top_ups, cold_transfers,
  refill_requests TO custody_state_writer;

-- SELECT ... FOR UPDATE (the engine locks these rows before it moves them) needs an UPDATE
-- right on some column. The one granted is UPDATE (id), and an id never changes: the
-- *_id_fixed triggers refuse it (triggers/withdrawals.sql, sweeps.sql, gas_top_ups.sql,
-- cold_transfers.sql, refill_requests.sql), so the grant lets custody_app lock a row and
-- nothing else.
GRANT UPDATE (id) ON withdrawals, sweeps, gas_top_ups, cold_transfers, refill_requests
  TO custody_app;
