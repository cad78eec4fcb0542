"""The double-entry ledger: the only source of truth about whose money is where.

Design in brief (DESIGN.md section 4):

- Amounts are ``int`` minor units; postings are signed (debit positive, credit negative) and
  stored as ``NUMERIC(39,0)`` inside the signed 128-bit range. Each asset stores its scale.
- ``service.post`` / ``service.post_batch`` are the only write path. They validate in Python
  (``model``) and call one set-based PostgreSQL function, ``ledger_post_arrays``, which locks the
  balance rows in account-id order, judges every item (idempotent replay, conflict, insufficient
  funds, period rules, reversal limits), and writes transactions, postings and the balance
  projection in the same database transaction. A single entry that reverses and closes nothing
  goes through ``ledger_post_one`` instead: the same verdicts in five statements for a
  transfer, the funds judged from an unlocked read and again by each balance row's UPDATE as it
  locks the row (``migrations/sql/0010_ledger_post_one.sql``).
- The database enforces the rules again, for every writer: both functions run as the
  NOLOGIN role ``custody_ledger_writer`` and check them themselves in set-based statements (balance
  per asset, the posting's asset equals its account's, periods, funds, reversal limits); any
  other writer (raw SQL by the application role or the owner) meets triggers that check the
  same (balanced per asset at commit, the account and asset of each posting, periods, reversal
  limits). For everyone: append-only tables, non-zero 128-bit amounts, flags as CHECKs on the
  projection, unique idempotency keys, and an application role with only SELECT and INSERT on
  the ledger tables. See ``migrations/sql/0006_ledger_fast_path.sql``.
- ``repository/`` holds all SQL, one module per concern (accounts, posting, transactions,
  balances, periods, checkpoints, integrity, statements), including the argument formats of the
  two write functions: ``model`` stays free of SQL formats.
- ``account_balances`` is a cache of the postings: ``integrity`` rebuilds it (from the newest
  verified checkpoint forward) and verifies it, along with the trial balance and the custody
  invariant.
- Bitemporal: every transaction has ``effective_at`` (value date) and ``recorded_at`` (set by the
  database); balances can be asked as of one and as known at the other. Closed periods refuse
  entries unless they are explicit out-of-period adjustments.
"""
