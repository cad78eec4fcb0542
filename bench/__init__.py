"""Benchmarks of the custody engine, run by hand (``python -m bench.<module>``); never part of the
tests. Each module measures one thing on real services and prints its own table; the figures,
the machine they were taken on and their analysis are kept in ``RESULTS.md``.

``ledger_bench`` measures ledger transactions per second on a fresh, migrated database with
PostgreSQL's durability settings left at their defaults: one hot account and 10,000 spread
accounts, through the ledger's own ``post`` and ``post_batch`` and through a plain
one-call-per-transfer PL/pgSQL baseline (``baseline.sql``) on tables of its own in the same
database. Afterwards it verifies the ledger (trial balance, stored = replayed) and the baseline.
"""
