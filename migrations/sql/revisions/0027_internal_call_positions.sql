-- Internal transfers (issue 18): ETH paid to our addresses by a call inside a transaction is a
-- deposit at its call-tree path, call:0.<i>.<j>... (0-based child indices below the top call,
-- see chains/traces.py). The position columns accepted only log:N and call:N; they now also
-- accept paths. Every value the old CHECKs admitted still passes.

ALTER TABLE deposits DROP CONSTRAINT deposits_position_check;
ALTER TABLE deposits ADD CONSTRAINT deposits_position_check
  CHECK (position ~ '^(log:[0-9]+|call:[0-9]+(\.[0-9]+)*)$');

ALTER TABLE internal_transfers DROP CONSTRAINT internal_transfers_position_check;
ALTER TABLE internal_transfers ADD CONSTRAINT internal_transfers_position_check
  CHECK (position ~ '^(log:[0-9]+|call:[0-9]+(\.[0-9]+)*)$');

ALTER TABLE withdrawal_returns DROP CONSTRAINT withdrawal_returns_position_check;
ALTER TABLE withdrawal_returns ADD CONSTRAINT withdrawal_returns_position_check
  CHECK (position ~ '^(log:[0-9]+|call:[0-9]+(\.[0-9]+)*)$');
