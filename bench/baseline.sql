-- Baseline for bench/ledger_bench.py: a plain one-call-per-transfer PL/pgSQL function of the kind
-- the design articles show, on tables of its own (never the ledger's). Per call it locks the two
-- balance rows in account-id order, inserts a journal row and two postings, and updates both
-- balances. The flags live in CHECKs on the balance rows, as in the ledger, so a transfer that
-- would overdraw an account fails the same way. Created and called by the owner login.

CREATE TABLE bl_accounts (
  id    bigint PRIMARY KEY,
  code  text NOT NULL UNIQUE
);

CREATE TABLE bl_balances (
  account_id                      bigint PRIMARY KEY REFERENCES bl_accounts (id),
  balance                         numeric(39, 0) NOT NULL DEFAULT 0,
  version                         bigint NOT NULL DEFAULT 0,
  debits_must_not_exceed_credits  boolean NOT NULL,
  credits_must_not_exceed_debits  boolean NOT NULL,
  CHECK (NOT debits_must_not_exceed_credits OR balance <= 0),
  CHECK (NOT credits_must_not_exceed_debits OR balance >= 0)
);

CREATE TABLE bl_journal (
  id               bigserial PRIMARY KEY,
  idempotency_key  text NOT NULL UNIQUE,
  recorded_at      timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE TABLE bl_postings (
  id          bigserial PRIMARY KEY,
  journal_id  bigint NOT NULL REFERENCES bl_journal (id),
  account_id  bigint NOT NULL REFERENCES bl_accounts (id),
  amount      numeric(39, 0) NOT NULL CHECK (amount <> 0)
);
CREATE INDEX bl_postings_account_idx ON bl_postings (account_id, id);
CREATE INDEX bl_postings_journal_idx ON bl_postings (journal_id);

-- Debit p_debit and credit p_credit by p_amount (> 0); returns the journal id.
CREATE FUNCTION baseline_transfer(p_debit bigint, p_credit bigint, p_amount numeric, p_key text)
RETURNS bigint
LANGUAGE plpgsql AS $fn$
DECLARE
  v_journal bigint;
  v_locked  int;
BEGIN
  IF p_amount <= 0 OR p_debit = p_credit THEN
    RAISE EXCEPTION 'baseline_transfer: invalid transfer' USING ERRCODE = 'check_violation';
  END IF;
  -- Both balance rows, locked in id order so that two transfers never deadlock.
  PERFORM 1 FROM bl_balances WHERE account_id IN (p_debit, p_credit)
    ORDER BY account_id FOR UPDATE;
  GET DIAGNOSTICS v_locked = ROW_COUNT;
  IF v_locked <> 2 THEN
    RAISE EXCEPTION 'baseline_transfer: unknown account' USING ERRCODE = 'foreign_key_violation';
  END IF;
  INSERT INTO bl_journal (idempotency_key) VALUES (p_key) RETURNING id INTO v_journal;
  INSERT INTO bl_postings (journal_id, account_id, amount)
  VALUES (v_journal, p_debit, p_amount), (v_journal, p_credit, -p_amount);
  UPDATE bl_balances SET balance = balance + p_amount, version = version + 1
   WHERE account_id = p_debit;
  UPDATE bl_balances SET balance = balance - p_amount, version = version + 1
   WHERE account_id = p_credit;
  RETURN v_journal;
END
$fn$;

-- Copy the ledger's accounts, their balances and their history (every ledger transaction as a
-- journal row, every posting as a posting), so that the baseline starts from the same table
-- sizes as the ledger and its own "stored = replayed" check holds from the start. The sizes
-- matter: a session plans its foreign-key checks once, for the table size it sees then, and a
-- journal seeded with one row had its checks planned as sequential scans that slowed the first
-- run measured as the journal grew (3,300 -> 1,300 tx/s within 5 s, RESULTS.md).
CREATE FUNCTION baseline_seed() RETURNS bigint
LANGUAGE plpgsql AS $fn$
DECLARE v_journals bigint;
BEGIN
  INSERT INTO bl_accounts (id, code) SELECT a.id, a.code FROM accounts a;
  INSERT INTO bl_balances (account_id, balance, version, debits_must_not_exceed_credits,
                           credits_must_not_exceed_debits)
  SELECT b.account_id, b.balance, b.version, b.debits_must_not_exceed_credits,
         b.credits_must_not_exceed_debits
    FROM account_balances b;
  INSERT INTO bl_journal (id, idempotency_key)
  SELECT t.id, 'ledger:' || t.idempotency_key FROM ledger_transactions t;
  GET DIAGNOSTICS v_journals = ROW_COUNT;
  PERFORM setval('bl_journal_id_seq', (SELECT coalesce(max(id), 0) + 1 FROM bl_journal), false);
  INSERT INTO bl_postings (journal_id, account_id, amount)
  SELECT p.transaction_id, p.account_id, p.amount FROM ledger_postings p ORDER BY p.id;
  RETURN v_journals;
END
$fn$;
