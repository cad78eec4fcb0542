"""Proof of reserves, the SQL: the ledger point a report is taken at, the ledger's figures read
in its snapshot (grouped queries only: never one per user or address), and the stored reports,
their addresses, signatures and liabilities trees.

Functions take an open connection and never commit, except :func:`ledger_point`, which opens the
report's read-only snapshot and closes it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from config.database import driver_rows
from config.uow import UnitOfWork
from ledger import chart
from ledger.repository import to_int
from reserves.merkle import Leaf, Node

#: The statement timeout of a report's reads and of its store (``allow_long_statements``).
REPORT_STATEMENT_TIMEOUT_MS = 600_000
#: Rows per chunk written to ``COPY``.
_COPY_ROWS = 10_000
#: What ``pg_export_snapshot`` returns (checked before it is written into ``SET TRANSACTION
#: SNAPSHOT``, which takes no bind parameter).
_SNAPSHOT_ID = re.compile(r"[0-9A-F]+-[0-9A-F]+(-[0-9]+)?")


@dataclass(frozen=True)
class LedgerPoint:
    """Where a report reads the ledger: every posting with id <= ``through_posting_id`` and no
    other, which is every ledger transaction committed before ``known_at``."""

    through_posting_id: int
    known_at: datetime


def allow_long_statements(conn: Connection) -> None:
    """Raise this transaction's statement timeout to REPORT_STATEMENT_TIMEOUT_MS: a report's
    grouped read and its ``COPY`` of a million leaves each take seconds, beyond the engine's
    default bound for one statement (30 s, meant for requests)."""
    conn.execute(sa.text(f"SET LOCAL statement_timeout = {int(REPORT_STATEMENT_TIMEOUT_MS)}"))


@contextmanager
def ledger_point(engine: Engine) -> Iterator[tuple[UnitOfWork, LedgerPoint]]:
    """A read-only unit of work whose snapshot holds exactly the postings up to a watermark.

    The way checkpoints take their watermark: the ledger write gate is taken exclusively (every
    posting transaction holds it shared until it commits), so no post is in flight; the
    snapshot taken then is exported and imported by the reader, and the gate is released at
    once. The reader then reads at leisure while posts go on: the gate is held only for the
    export, never for the report's reads.
    """
    # Both connections are checked out before the gate is taken: waiting for a pooled
    # connection while holding it would stall every post meanwhile.
    with UnitOfWork(engine) as uow, engine.connect() as gate:
        # Waits for the posts in flight to commit; new ones wait for this transaction's end.
        gate.execute(sa.text("SELECT pg_advisory_xact_lock(7301, 1)"))
        row = gate.execute(sa.text(
            "SELECT coalesce(max(id), 0) AS through, clock_timestamp() AS known_at, "
            "pg_export_snapshot() AS snapshot FROM ledger_postings")).one()
        snapshot = str(row.snapshot)
        if not _SNAPSHOT_ID.fullmatch(snapshot):
            raise RuntimeError(f"PostgreSQL exported an unexpected snapshot id {snapshot!r}")
        uow.conn.execute(sa.text("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY"))
        uow.conn.execute(sa.text(f"SET TRANSACTION SNAPSHOT '{snapshot}'"))
        allow_long_statements(uow.conn)
        gate.commit()  # The gate is released: the reader holds the snapshot.
        yield uow, LedgerPoint(int(row.through), row.known_at)


# --- the ledger's figures, in the report's snapshot ----------------------------------------

def user_balances(conn: Connection, asset_ids: Sequence[int]
                  ) -> list[tuple[str, tuple[int, ...]]]:
    """Every user with a balance row: its posted balance (wallet + withdrawals reserved, on
    their credit side) in each asset of ``asset_ids``, in that order (0 where it has none).

    The user id is everything between ``user:`` and the account's last part (a company user
    such as ``company:refunds`` holds a colon itself). One row per user, pivoted in the
    database and read through the driver: a million users are three million accounts."""
    columns = ", ".join(
        f"CAST(coalesce(sum(-b.balance) FILTER (WHERE a.asset_id = {int(i)}), 0) AS text)"
        for i in asset_ids)
    rows = driver_rows(conn, (
        "SELECT substring(a.code FROM %(user)s), "
        f"{columns or 'NULL'} FROM accounts a JOIN account_balances b ON b.account_id = a.id "
        "WHERE a.code LIKE 'user:%%' AND (a.code LIKE %(wallet)s OR a.code LIKE %(withdrawals)s) "
        "GROUP BY 1"), {"user": "^user:(.+):(?:wallet|withdrawals)$", "wallet": "%:wallet",
                        "withdrawals": "%:withdrawals"})
    width = len(asset_ids)
    return [(r[0], tuple(int(v) for v in r[1:width + 1])) for r in rows]


def _per_asset(conn: Connection, where: str, params: Mapping[str, Any]) -> dict[str, int]:
    rows = conn.execute(sa.text(
        "SELECT s.code AS asset, sum(b.balance) AS raw FROM accounts a "
        "JOIN account_balances b ON b.account_id = a.id JOIN assets s ON s.id = a.asset_id "
        f"WHERE {where} GROUP BY 1"), params)
    return {str(r.asset): to_int(r.raw) for r in rows}


def other_liabilities(conn: Connection) -> dict[str, int]:
    """Customer money owed to no user yet, per asset: unattributed suspense and what the
    providers' clearing accounts hold, each account's credit balance only. A clearing account
    with a debit balance (a transfer of ours the provider does not have) is a claim, not a
    liability: netting it would lower what is owed, so it counts as zero."""
    rows = conn.execute(sa.text(
        "SELECT s.code AS asset, sum(greatest(-b.balance, 0)) AS owed FROM accounts a "
        "JOIN account_balances b ON b.account_id = a.id JOIN assets s ON s.id = a.asset_id "
        "WHERE a.code = :s OR a.code LIKE :c GROUP BY 1"),
        {"s": chart.SUSPENSE_UNATTRIBUTED, "c": chart.CLEARING_PROVIDER_PREFIX + "%"})
    return {str(r.asset): to_int(r.owed) for r in rows}


def custody_and_treasury(conn: Connection) -> tuple[dict[str, int], dict[str, int]]:
    """The ledger's custody and treasury per asset, over every chain (debit side)."""
    return (_per_asset(conn, "a.code LIKE :p", {"p": "custody:%"}),
            _per_asset(conn, "a.code LIKE :p", {"p": "treasury:%"}))


def asset_scales(conn: Connection) -> dict[str, tuple[int, int]]:
    """Every ledger asset: its (id, scale) by code."""
    return {str(r.code): (int(r.id), int(r.scale))
            for r in conn.execute(sa.text("SELECT id, code, scale FROM assets"))}


def deposit_indexes(conn: Connection, family: str) -> dict[str, int]:
    """The derivation index of each deposit address of ``family`` (what its signer needs)."""
    return {str(r.address): int(r.derivation_index) for r in conn.execute(sa.text(
        "SELECT address, derivation_index FROM deposit_addresses WHERE family = :f"),
        {"f": family})}


# --- stored reports -------------------------------------------------------------------------


def next_report_id(conn: Connection) -> int:
    """A new report id (taken before the report is signed: the messages name it)."""
    return int(conn.execute(sa.text("SELECT nextval('reserve_reports_id_seq')")).scalar_one())


@dataclass(frozen=True)
class AddressRow:
    """One address of a report as stored (``signature``: None until one is recorded)."""

    chain: str
    address: str
    kind: str
    holdings: list[dict[str, Any]]
    signer: str
    signature: str | None = None


@dataclass(frozen=True)
class ReportRow:
    """A stored report: its row and its published document (without the addresses)."""

    id: int
    taken_at: datetime
    through_posting_id: int
    known_at: datetime
    root_hash: str
    depth: int
    users_count: int
    taken_by: str
    document: dict[str, Any]


def insert_report(conn: Connection, report: ReportRow, addresses: Sequence[AddressRow],
                  leaves: Sequence[tuple[Leaf, bytes]], nodes: Iterable[tuple[int, int, Node]],
                  *, recorded_at: datetime) -> None:
    """Store a report whole: its row, its addresses with the engine's signatures, every leaf
    (in tree order, with its hash) and the tree's upper nodes. Leaves and nodes go through
    ``COPY``: a report of a million users writes a million leaves."""
    conn.execute(sa.text(
        "INSERT INTO reserve_reports (id, taken_at, through_posting_id, known_at, root_hash, "
        "depth, users_count, taken_by, document) VALUES (:id, :taken_at, :through, :known_at, "
        ":root, :depth, :users, :by, CAST(:doc AS jsonb))"),
        {"id": report.id, "taken_at": report.taken_at, "through": report.through_posting_id,
         "known_at": report.known_at, "root": report.root_hash, "depth": report.depth,
         "users": report.users_count, "by": report.taken_by, "doc": _json(report.document)})
    if addresses:
        conn.execute(sa.text(
            "INSERT INTO reserve_report_addresses (report_id, chain, address, kind, holdings, "
            "signer) VALUES (:r, :c, :a, :k, CAST(:h AS jsonb), :s)"),
            [{"r": report.id, "c": a.chain, "a": a.address, "k": a.kind,
              "h": _json(a.holdings), "s": a.signer} for a in addresses])
    signed = [a for a in addresses if a.signature is not None]
    if signed:
        insert_signatures(conn, report.id, [(a.chain, a.address, str(a.signature))
                                            for a in signed],
                          source="engine", recorded_by=report.taken_by, recorded_at=recorded_at)
    raw = conn.connection.driver_connection
    assert raw is not None
    with raw.cursor() as cur:
        # COPY's text format written directly (psycopg's per-value adaptation costs more than
        # the database's parsing): user ids are [A-Za-z0-9_.-] and need no escaping; bytea in
        # hex, its backslash doubled as COPY's text format requires.
        with cur.copy("COPY reserve_leaves (report_id, position, user_id, salt, balances, hash) "
                      "FROM STDIN") as copy:
            for start in range(0, len(leaves), _COPY_ROWS):
                copy.write("".join(
                    f"{report.id}\t{start + i}\t{leaf.user_id}\t\\\\x{leaf.salt.hex()}\t"
                    f"{{{','.join(map(str, leaf.balances))}}}\t\\\\x{digest.hex()}\n"
                    for i, (leaf, digest) in enumerate(leaves[start:start + _COPY_ROWS])))
        with cur.copy("COPY reserve_nodes (report_id, level, position, hash, sums) "
                      "FROM STDIN") as copy:
            copy.write("".join(
                f"{report.id}\t{level}\t{position}\t\\\\x{node.hash.hex()}\t"
                f"{{{','.join(map(str, node.sums))}}}\n" for level, position, node in nodes))


def insert_signatures(conn: Connection, report_id: int,
                      signatures: Sequence[tuple[str, str, str]], *, source: str,
                      recorded_by: str, recorded_at: datetime) -> int:
    """Record (chain, address, signature) rows of a report; an address already signed keeps
    its first signature (returns how many were new)."""
    if not signatures:
        return 0
    result = conn.execute(sa.text(
        "INSERT INTO reserve_signatures (report_id, chain, address, signature, source, "
        "recorded_by, recorded_at) VALUES (:r, :c, :a, :s, :src, :by, :at) "
        "ON CONFLICT DO NOTHING"),
        [{"r": report_id, "c": c, "a": a, "s": s, "src": source, "by": recorded_by,
          "at": recorded_at} for c, a, s in signatures])
    return int(result.rowcount)


def _json(value: object) -> str:
    import json

    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def _report(row: Any) -> ReportRow:
    return ReportRow(int(row.id), row.taken_at, int(row.through_posting_id), row.known_at,
                     str(row.root_hash), int(row.depth), int(row.users_count), str(row.taken_by),
                     dict(row.document))


_REPORT_COLUMNS = ("id, taken_at, through_posting_id, known_at, root_hash, depth, users_count, "
                   "taken_by, document")


def get_report(conn: Connection, report_id: int | None) -> ReportRow | None:
    """Report ``report_id`` (None: the newest), or None."""
    if report_id is None:
        row = conn.execute(sa.text(
            f"SELECT {_REPORT_COLUMNS} FROM reserve_reports ORDER BY id DESC LIMIT 1")).first()
    else:
        row = conn.execute(sa.text(
            f"SELECT {_REPORT_COLUMNS} FROM reserve_reports WHERE id = :id"),
            {"id": report_id}).first()
    return None if row is None else _report(row)


def report_addresses(conn: Connection, report_id: int) -> list[AddressRow]:
    """A report's addresses with their signatures (engine or imported), by chain and kind."""
    rows = conn.execute(sa.text(
        "SELECT a.chain, a.address, a.kind, a.holdings, a.signer, s.signature "
        "FROM reserve_report_addresses a LEFT JOIN reserve_signatures s "
        "ON (s.report_id, s.chain, s.address) = (a.report_id, a.chain, a.address) "
        "WHERE a.report_id = :r ORDER BY a.chain, "
        "array_position(ARRAY['hot', 'cold', 'deposit'], a.kind), a.address"), {"r": report_id})
    return [AddressRow(str(r.chain), str(r.address), str(r.kind), list(r.holdings),
                       str(r.signer), r.signature) for r in rows]


def list_reports(conn: Connection, *, limit: int, before_id: int | None = None
                 ) -> list[ReportRow]:
    """Stored reports, newest first (keyset pagination by id)."""
    rows = conn.execute(sa.text(
        f"SELECT {_REPORT_COLUMNS} FROM reserve_reports "
        "WHERE CAST(:before AS bigint) IS NULL OR id < :before ORDER BY id DESC LIMIT :limit"),
        {"before": before_id, "limit": limit})
    return [_report(r) for r in rows]


# --- the liabilities tree -------------------------------------------------------------------


def leaf_of(conn: Connection, report_id: int, user_id: str
            ) -> tuple[int, Leaf] | None:
    """The user's leaf in report ``report_id`` (its position and inputs), or None."""
    row = conn.execute(sa.text(
        "SELECT position, salt, CAST(balances AS text[]) AS balances FROM reserve_leaves "
        "WHERE report_id = :r AND user_id = :u"), {"r": report_id, "u": user_id}).first()
    if row is None:
        return None
    return int(row.position), Leaf(user_id, bytes(row.salt),
                                   tuple(int(v) for v in row.balances))


def chunk_leaves(conn: Connection, report_id: int, lo: int, hi: int) -> list[Node]:
    """The stored leaves at positions [lo, hi) as nodes, in order (padding is not stored)."""
    rows = conn.execute(sa.text(
        "SELECT hash, CAST(balances AS text[]) AS balances FROM reserve_leaves "
        "WHERE report_id = :r AND position >= :lo AND position < :hi ORDER BY position"),
        {"r": report_id, "lo": lo, "hi": hi})
    return [Node(bytes(r.hash), tuple(int(v) for v in r.balances)) for r in rows]


def upper_nodes(conn: Connection, report_id: int, keys: Sequence[tuple[int, int]]
                ) -> dict[tuple[int, int], Node]:
    """The stored nodes at (level, position) ``keys``."""
    if not keys:
        return {}
    rows = conn.execute(sa.text(
        "SELECT n.level, n.position, n.hash, CAST(n.sums AS text[]) AS sums "
        "FROM reserve_nodes n JOIN unnest(CAST(:levels AS smallint[]), "
        "CAST(:positions AS integer[])) AS k(level, position) "
        "ON n.level = k.level AND n.position = k.position WHERE n.report_id = :r"),
        {"r": report_id, "levels": [k[0] for k in keys], "positions": [k[1] for k in keys]})
    return {(int(r.level), int(r.position)): Node(bytes(r.hash), tuple(int(v) for v in r.sums))
            for r in rows}
