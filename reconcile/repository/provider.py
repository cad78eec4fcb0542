"""The database side of provider statements: the stored statements and their records
(``provider_statements``, ``provider_statement_records``, append-only), our ledger's records
that reference a provider, and the provider's clearing balances. Every function takes an open
connection and never commits.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ledger import chart
from ledger.repository import to_int
from reconcile.provider_model import OurRecord, Statement, StatementRecord

#: The provider a ledger transaction references: a fix's own ``provider`` (with its
#: ``provider_reference``), or the attestation of the deposit it credits. The expression and the
#: predicate of the index ``ledger_transactions_provider_idx`` (migration 0022).
_PROVIDER_OF = ("coalesce(t.metadata ->> 'provider', "
                "t.metadata -> 'evidence' -> 'attestation' ->> 'provider')")
_REFERENCES_A_PROVIDER = ("(t.metadata ? 'provider' OR "
                          "t.metadata -> 'evidence' -> 'attestation' ? 'provider')")


def _record(row: sa.Row[tuple[object, ...]]) -> StatementRecord:
    m = row._mapping
    return StatementRecord(str(m["provider"]), str(m["reference"]),
                           "in" if m["direction"] == "in" else "out", str(m["asset"]),
                           to_int(m["amount_minor"]), m["occurred_at"], m["chain"], m["tx_hash"])


def find_statement(conn: Connection, provider: str, sha256: str) -> int | None:
    """The id of the statement of ``provider`` with these bytes, if it was imported."""
    found = conn.execute(sa.text("SELECT id FROM provider_statements WHERE provider = :p AND "
                                 "sha256 = :s"), {"p": provider, "s": sha256}).scalar()
    return None if found is None else int(found)


def lock_provider(conn: Connection, provider: str) -> None:
    """Serialize imports of one provider's statements (two imports of overlapping files would
    otherwise both find a reference new and one would fail on the unique key)."""
    conn.execute(sa.text("SELECT pg_advisory_xact_lock(7352, hashtext(:p))"), {"p": provider})


def insert_statement(conn: Connection, statement: Statement, *, sha256: str,
                     file_name: str | None, imported_by: str, imported_at: datetime) -> int:
    """Store a statement's header; its id."""
    return int(conn.execute(sa.text(
        "INSERT INTO provider_statements (provider, format, sha256, file_name, period_start, "
        "period_end, record_count, imported_by, imported_at) VALUES (:p, :f, :s, :n, :ps, :pe, "
        ":c, :by, :at) RETURNING id"),
        {"p": statement.provider, "f": statement.format, "s": sha256, "n": file_name,
         "ps": statement.period_start, "pe": statement.period_end,
         "c": len(statement.records), "by": imported_by, "at": imported_at}).scalar_one())


def stored_records(conn: Connection, provider: str,
                   references: Iterable[str]) -> dict[str, StatementRecord]:
    """The stored records of ``provider`` among ``references``."""
    rows = conn.execute(sa.text(
        "SELECT * FROM provider_statement_records WHERE provider = :p AND "
        "reference = ANY(:r)"), {"p": provider, "r": sorted(set(references))})
    return {str(r.reference): _record(r) for r in rows}


def insert_records(conn: Connection, statement_id: int,
                   records: Sequence[StatementRecord]) -> None:
    """Store records under a statement, in one statement."""
    if not records:
        return
    conn.execute(sa.text(
        "INSERT INTO provider_statement_records (statement_id, provider, reference, direction, "
        "asset, amount_minor, occurred_at, chain, tx_hash) SELECT :sid, x.provider, "
        "x.reference, x.direction, x.asset, CAST(x.amount_minor AS numeric), x.occurred_at, "
        "x.chain, x.tx_hash FROM jsonb_to_recordset(CAST(:rows AS jsonb)) AS x(provider text, "
        "reference text, direction text, asset text, amount_minor text, "
        "occurred_at timestamptz, chain text, tx_hash text)"),
        {"sid": statement_id, "rows": json.dumps([r.to_json() for r in records])})


def records_in_period(conn: Connection, provider: str, start: datetime,
                      end: datetime) -> list[StatementRecord]:
    """Every stored record of ``provider`` that occurred in ``[start, end)``, by reference."""
    rows = conn.execute(sa.text(
        "SELECT * FROM provider_statement_records WHERE provider = :p AND occurred_at >= :s "
        "AND occurred_at < :e ORDER BY reference"), {"p": provider, "s": start, "e": end})
    return [_record(r) for r in rows]


def our_records(conn: Connection, provider: str, start: datetime, end: datetime,
                references: Sequence[str]) -> list[OurRecord]:
    """Our records of ``provider``: the ledger transactions that reference it (deposit credits
    it attested, under their reference ``<chain>:<tx_hash>:<position>``; fixes of its cases,
    under their ``provider_reference``) with their reversals, grouped by reference and asset.
    ``net_minor`` is what they moved in ``custody:*`` (positive in); ``occurred_at`` the first
    one's effective time.

    Which: those under ``references`` (the provider's records of the period: matched whenever
    we booked them), and those that occurred in ``[start, end)`` unless the provider reported
    them in another period (a credit booked just after midnight for a transfer of the day
    before is that statement's)."""
    rows = conn.execute(sa.text(
        "WITH base AS ("
        " SELECT t.id, coalesce(t.metadata ->> 'provider_reference', t.reference) AS ref, "
        "  t.effective_at FROM ledger_transactions t "
        f" WHERE {_PROVIDER_OF} = :p AND {_REFERENCES_A_PROVIDER} AND ("
        "  t.metadata ? 'provider_reference' "
        "  OR t.metadata -> 'evidence' -> 'attestation' ->> 'attestor' = 'provider')), "
        "txs AS (SELECT id, ref, effective_at FROM base UNION "
        " SELECT r.id, b.ref, b.effective_at FROM ledger_transactions r "
        " JOIN base b ON r.reverses_transaction_id = b.id) "
        "SELECT x.ref, s.code AS asset, sum(p.amount) AS net, min(x.effective_at) AS at, "
        " array_agg(DISTINCT x.id ORDER BY x.id) AS ids "
        "FROM txs x JOIN ledger_postings p ON p.transaction_id = x.id "
        "JOIN accounts a ON a.id = p.account_id JOIN assets s ON s.id = p.asset_id "
        "WHERE a.code LIKE 'custody:%' AND x.ref IS NOT NULL GROUP BY x.ref, s.code "
        "HAVING x.ref = ANY(:refs) OR (min(x.effective_at) >= :s AND min(x.effective_at) < :e "
        " AND NOT EXISTS (SELECT 1 FROM provider_statement_records o WHERE o.provider = :p "
        "  AND o.reference = x.ref AND NOT (o.occurred_at >= :s AND o.occurred_at < :e))) "
        "ORDER BY 1, 2"),
        {"p": provider, "s": start, "e": end, "refs": list(references)})
    return [OurRecord(str(r.ref), str(r.asset), to_int(r.net), r.at,
                      tuple(int(i) for i in r.ids), f"ledger:{int(r.ids[0])}") for r in rows]


def clearing_balances(conn: Connection, provider: str) -> dict[str, int]:
    """The provider's clearing account per asset, on its normal (credit) side: what was booked
    there and not yet attributed (from the stored balances)."""
    rows = conn.execute(sa.text(
        "SELECT s.code AS asset, b.balance FROM accounts a JOIN assets s ON s.id = a.asset_id "
        "JOIN account_balances b ON b.account_id = a.id WHERE a.code = :c"),
        {"c": chart.clearing_provider(provider).code})
    return {str(r.asset): -to_int(r.balance) for r in rows}


def latest_statements(conn: Connection) -> list[tuple[int, str, datetime, datetime]]:
    """The newest statement of each provider: (id, provider, period start, period end)."""
    rows = conn.execute(sa.text(
        "SELECT DISTINCT ON (provider) id, provider, period_start, period_end "
        "FROM provider_statements ORDER BY provider, id DESC"))
    return [(int(r.id), str(r.provider), r.period_start, r.period_end) for r in rows]
