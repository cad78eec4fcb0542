-- Withdrawals: the state 'signing' (withdrawals.model.State.SIGNING). Transaction A assigns the
-- nonce and fee caps and commits in 'signing'; the signer is called outside any transaction;
-- transaction B records the attempt and moves the withdrawal to 'signed'. The CHECK is replaced
-- under its own name, so that the state CHECK stays one constraint on withdrawals.state.
ALTER TABLE withdrawals DROP CONSTRAINT withdrawals_state_check;
ALTER TABLE withdrawals ADD CONSTRAINT withdrawals_state_check CHECK (state IN ('requested',
  'pending_approval', 'reserved', 'signing', 'signed', 'broadcast', 'included', 'unknown',
  'awaiting_write_off', 'settled', 'reverted', 'released', 'canceled', 'rejected',
  'written_off'));
