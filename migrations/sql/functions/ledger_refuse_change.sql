-- ledger_refuse_change: the trigger function behind every append-only guard (the *_append_only,
-- *_no_delete and *_no_truncate triggers in triggers/). It raises, whoever the caller is: a fix
-- to money is a new correcting transaction, never an UPDATE or DELETE.

CREATE OR REPLACE FUNCTION ledger_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'table % is append-only: % refused', TG_TABLE_NAME, TG_OP
    USING ERRCODE = 'raise_exception', HINT = 'post a correcting transaction instead';
END
$$;
