-- The transactions' reference index no longer holds the NULL references (most entries have
-- none, and nothing looks them up), so most inserts skip one index.

DROP INDEX ledger_transactions_reference_idx;
CREATE INDEX ledger_transactions_reference_idx ON ledger_transactions (reference)
  WHERE reference IS NOT NULL;
