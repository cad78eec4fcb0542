"""SQLAlchemy Core descriptions of the ledger tables (the schema itself is owned by migrations).

Used by the repository for typed queries; the CHECKs, triggers and grants live in
``migrations/sql/0001_ledger.sql``.
"""

from __future__ import annotations

import sqlalchemy as sa

metadata = sa.MetaData()
# NUMERIC integers |x| < 2^127 (the money128 domain); read as Decimal, turned into int by the
# repository. Never asdecimal=False (floats).
Money = sa.Numeric(asdecimal=True)

assets = sa.Table(
    "assets",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("code", sa.Text, nullable=False, comment="Asset code, e.g. USDC"),
    sa.Column("scale", sa.SmallInteger, nullable=False, comment="Decimals of one minor unit"),
    sa.Column("created_at", sa.DateTime(timezone=True)),
)

accounts = sa.Table(
    "accounts",
    metadata,
    sa.Column("id", sa.BigInteger, primary_key=True),
    sa.Column("code", sa.Text, nullable=False, comment="e.g. user:42:wallet"),
    sa.Column("asset_id", sa.Integer, nullable=False),
    sa.Column("type", sa.Text, nullable=False, comment="asset/liability/equity/revenue/expense"),
    sa.Column("debits_must_not_exceed_credits", sa.Boolean, nullable=False),
    sa.Column("credits_must_not_exceed_debits", sa.Boolean, nullable=False),
    sa.Column("created_at", sa.DateTime(timezone=True)),
)

ledger_transactions = sa.Table(
    "ledger_transactions",
    metadata,
    sa.Column("id", sa.BigInteger, primary_key=True),
    sa.Column("idempotency_key", sa.Text, nullable=False, comment="Unique per request"),
    sa.Column("fingerprint", sa.Text, nullable=False, comment="SHA-256 of the request"),
    sa.Column("kind", sa.Text, nullable=False, comment="Business event type"),
    sa.Column("reference", sa.Text, comment="External reference"),
    sa.Column("effective_at", sa.DateTime(timezone=True), nullable=False, comment="Value date"),
    sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False, comment="Set by the DB"),
    sa.Column("reason", sa.Text, comment="Why (required for corrections)"),
    sa.Column("source", sa.Text, nullable=False, comment="Who or what wrote it"),
    sa.Column("reverses_transaction_id", sa.BigInteger, comment="The transaction it reverses"),
    sa.Column("out_of_period", sa.Boolean, nullable=False, comment="Adjustment of a closed period"),
    sa.Column("metadata", sa.JSON, nullable=False, comment="Free-form evidence"),
)

ledger_postings = sa.Table(
    "ledger_postings",
    metadata,
    sa.Column("id", sa.BigInteger, primary_key=True),
    sa.Column("transaction_id", sa.BigInteger, nullable=False),
    sa.Column("line_no", sa.SmallInteger, nullable=False, comment="1-based line of the entry"),
    sa.Column("account_id", sa.BigInteger, nullable=False),
    sa.Column("asset_id", sa.Integer, nullable=False, comment="Equals the account's asset"),
    sa.Column("amount", Money, nullable=False, comment="Signed minor units, debit positive"),
    sa.Column("closes_posting_id", sa.BigInteger, comment="Open item this posting closes"),
    sa.Column("reverses_posting_id", sa.BigInteger, comment="Posting this one reverses"),
)

account_balances = sa.Table(
    "account_balances",
    metadata,
    sa.Column("account_id", sa.BigInteger, primary_key=True),
    sa.Column("asset_id", sa.Integer, nullable=False),
    sa.Column("balance", Money, nullable=False, comment="Raw sum of postings, debit positive"),
    sa.Column("version", sa.BigInteger, nullable=False, comment="Transactions that touched it"),
    sa.Column("debits_must_not_exceed_credits", sa.Boolean, nullable=False),
    sa.Column("credits_must_not_exceed_debits", sa.Boolean, nullable=False),
    sa.Column("updated_at", sa.DateTime(timezone=True)),
)

ledger_periods = sa.Table(
    "ledger_periods",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("ends_at", sa.DateTime(timezone=True), nullable=False, comment="Closed before"),
    sa.Column("closed_at", sa.DateTime(timezone=True), nullable=False, comment="When closed"),
    sa.Column("closed_by", sa.Text, nullable=False),
    sa.Column("reason", sa.Text),
)

balance_checkpoints = sa.Table(
    "balance_checkpoints",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("through_posting_id", sa.BigInteger, nullable=False, comment="Covers ids <= this"),
    sa.Column("created_at", sa.DateTime(timezone=True)),
    sa.Column("verified", sa.Boolean, nullable=False, comment="Agreed with stored balances"),
    sa.Column("accounts_count", sa.Integer, nullable=False),
    sa.Column("digest", sa.Text, nullable=False, comment="SHA-256 over its entries"),
    sa.Column("seal_id", sa.BigInteger, comment="Newest ledger seal when it was taken"),
    sa.Column("seal_hash", sa.Text, comment="That seal's hash (checked by verify)"),
)

balance_checkpoint_entries = sa.Table(
    "balance_checkpoint_entries",
    metadata,
    sa.Column("checkpoint_id", sa.Integer, primary_key=True),
    sa.Column("account_id", sa.BigInteger, primary_key=True),
    sa.Column("balance", Money, nullable=False),
    sa.Column("version", sa.BigInteger, nullable=False),
)
