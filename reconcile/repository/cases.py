"""The cases table: open or re-sight cases for findings, read them, resolve one."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from reconcile.model import Case, Finding

_COLUMNS = ("id, type, subject, refs, expected, observed, evidence, status, first_seen_at, "
            "last_seen_at, seen_count, opened_by, resolution, resolved_by, resolved_at, "
            "resolution_transaction_id")


def _case(r: Any) -> Case:
    return Case(r.id, r.type, r.subject, dict(r.refs), r.expected, r.observed, dict(r.evidence),
                r.status, r.first_seen_at, r.last_seen_at, r.seen_count, r.opened_by,
                r.resolution, r.resolved_by, r.resolved_at, r.resolution_transaction_id)


def upsert(conn: Connection, opened_by: str, findings: Sequence[Finding],
           now: datetime) -> list[tuple[int, bool]]:
    """Open a case per finding, or re-sight the open case of its type and subject; return
    (case id, opened) per finding, in order. One statement: two checks recording the same
    finding at once meet on the open-case index and one of them re-sights."""
    if not findings:
        return []
    rows = json.dumps([{"n": n, "type": f.type, "subject": f.subject, "refs": dict(f.refs),
                        "expected": f.expected, "observed": f.observed,
                        "evidence": dict(f.evidence)} for n, f in enumerate(findings)],
                      default=str)
    result = conn.execute(sa.text(
        "WITH f AS (SELECT * FROM jsonb_to_recordset(CAST(:rows AS jsonb)) AS x(n int, "
        "  type text, subject text, refs jsonb, expected text, observed text, evidence jsonb)), "
        "w AS (INSERT INTO cases AS c (type, subject, refs, expected, observed, evidence, "
        "  first_seen_at, last_seen_at, opened_by) "
        "  SELECT type, subject, refs, expected, observed, evidence, :now, :now, :by "
        "  FROM f ORDER BY n "
        "  ON CONFLICT (type, subject) WHERE status = 'open' DO UPDATE SET "
        "    last_seen_at = greatest(c.last_seen_at, EXCLUDED.last_seen_at), "
        "    seen_count = c.seen_count + 1, observed = EXCLUDED.observed, "
        "    evidence = EXCLUDED.evidence "
        "  RETURNING c.id, c.type, c.subject, (c.xmax = 0) AS opened) "
        "SELECT w.id, w.opened FROM w JOIN f USING (type, subject) ORDER BY f.n"),
        {"rows": rows, "now": now, "by": opened_by})
    return [(int(r.id), bool(r.opened)) for r in result]


def get(conn: Connection, case_id: int, *, lock: bool = False) -> Case | None:
    """One case (``lock``: its row locked until commit)."""
    row = conn.execute(sa.text(f"SELECT {_COLUMNS} FROM cases WHERE id = :i"
                               + (" FOR UPDATE" if lock else "")), {"i": case_id}).first()
    return None if row is None else _case(row)


def by_ids(conn: Connection, ids: Sequence[int]) -> list[Case]:
    """The cases with these ids, by id."""
    rows = conn.execute(sa.text(f"SELECT {_COLUMNS} FROM cases WHERE id = ANY(:ids) ORDER BY id"),
                        {"ids": list(ids)})
    return [_case(r) for r in rows]


def select(conn: Connection, *, type: str | None, status: str | None, subject: str | None,
           limit: int, after_id: int = 0, since: datetime | None = None,
           until: datetime | None = None) -> list[Case]:
    """Cases, oldest first, optionally of one type, status and subject, first seen in
    ``[since, until)``."""
    rows = conn.execute(sa.text(
        f"SELECT {_COLUMNS} FROM cases WHERE id > :a "
        "AND (CAST(:t AS text) IS NULL OR type = :t) "
        "AND (CAST(:s AS text) IS NULL OR status = :s) "
        "AND (CAST(:since AS timestamptz) IS NULL OR first_seen_at >= :since) "
        "AND (CAST(:until AS timestamptz) IS NULL OR first_seen_at < :until) "
        "AND (CAST(:j AS text) IS NULL OR subject = :j) ORDER BY id LIMIT :n"),
        {"a": after_id, "t": type, "s": status, "j": subject, "n": limit, "since": since,
         "until": until})
    return [_case(r) for r in rows]


def count_open_by_type(conn: Connection) -> dict[str, int]:
    """type -> how many cases of it are open."""
    rows = conn.execute(sa.text(
        "SELECT type, count(*) AS n FROM cases WHERE status = 'open' GROUP BY type"))
    return {r.type: int(r.n) for r in rows}


def transaction_names(conn: Connection, transaction_id: int) -> tuple[str, str | None] | None:
    """(idempotency key, reference) of a ledger transaction; None when there is none."""
    row = conn.execute(sa.text(
        "SELECT idempotency_key, reference FROM ledger_transactions WHERE id = :i"),
        {"i": transaction_id}).first()
    return None if row is None else (row.idempotency_key, row.reference)


def resolve(conn: Connection, case_id: int, *, by: str, resolution: str,
            transaction_id: int | None, at: datetime) -> None:
    """Resolve an open case (locked by the caller)."""
    conn.execute(sa.text(
        "UPDATE cases SET status = 'resolved', resolution = :r, resolved_by = :b, "
        "resolved_at = :at, resolution_transaction_id = :t WHERE id = :i AND status = 'open'"),
        {"i": case_id, "r": resolution, "b": by, "at": at, "t": transaction_id})
