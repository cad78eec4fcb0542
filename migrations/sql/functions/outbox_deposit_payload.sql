-- outbox_deposit_payload: the payload (version 2, docs/webhooks.md) of the deposit event written
-- for the history row `history_id` (triggers/deposit_events.sql): the deposit and the history row
-- under the names of the API's Deposit and DepositEvent, ids as strings, the amount as
-- {"minor", "decimal"}. Deposit events store no payload (revision 0034): outbox_payload renders
-- it here when the event is read. Every input is fixed once the history row exists (a deposit's
-- facts never change, history rows are append-only, an asset's scale never changes), so every
-- read gives the same payload. NULL when there is no such history row.

CREATE OR REPLACE FUNCTION outbox_deposit_payload(history_id bigint) RETURNS jsonb
  LANGUAGE sql STABLE PARALLEL SAFE AS $$
  SELECT jsonb_build_object(
           'deposit', jsonb_build_object(
             'id', d.id::text, 'user_id', d.user_id, 'chain', d.chain,
             'tx_hash', d.tx_hash, 'position', d.position, 'token', d.token,
             'from_address', d.from_address, 'to_address', d.to_address,
             'asset', d.asset_code,
             'amount', outbox_amount(d.amount_minor, a.scale),
             'state', n.state, 'block_number', n.block_number,
             'confirmations', n.confirmations,
             'ledger_transaction_id', n.ledger_transaction_id::text),
           'history', jsonb_build_object(
             'id', n.id::text, 'event', n.event, 'state', n.state,
             'block_number', n.block_number, 'block_hash', n.block_hash,
             'confirmations', n.confirmations, 'rule', n.rule, 'reason', n.reason,
             'ledger_transaction_id', n.ledger_transaction_id::text,
             'observed_at', n.observed_at, 'recorded_at', n.recorded_at))
    FROM deposit_events n
    JOIN deposits d ON d.id = n.deposit_id
    LEFT JOIN assets a ON a.code = d.asset_code
   WHERE n.id = history_id
$$;
