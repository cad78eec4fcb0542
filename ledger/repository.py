"""All SQL of the ledger. Functions take a Connection inside an open transaction.

Numbers leave the database as ``Decimal`` (NUMERIC(39,0)) and are turned into ``int`` here, at
the boundary, so nothing above this module sees a Decimal.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

import sqlalchemy as sa
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Connection, Engine

from config.database import driver_rows
from ledger import tables as t
from ledger.model import Account, AccountType, Asset, OneParams, PostArrays


def to_int(value: Decimal | int | None) -> int:
    """Exact conversion of a NUMERIC(39,0) value to ``int`` (None counts as 0)."""
    if value is None:
        return 0
    if isinstance(value, Decimal):
        assert value == value.to_integral_value(), f"fractional amount from the database: {value}"
    return int(value)


@dataclass(frozen=True)
class PostingRecord:
    """A stored posting."""

    id: int
    transaction_id: int
    line_no: int
    account_id: int
    amount_minor: int
    closes_posting_id: int | None
    reverses_posting_id: int | None


@dataclass(frozen=True)
class TransactionRecord:
    """A stored ledger transaction with its postings."""

    id: int
    idempotency_key: str
    kind: str
    reference: str | None
    effective_at: datetime
    recorded_at: datetime
    reason: str | None
    source: str
    reverses_transaction_id: int | None
    out_of_period: bool
    metadata: dict[str, Any]
    postings: tuple[PostingRecord, ...]


# --- assets and accounts ----------------------------------------------------------------------


def _asset(row: Any) -> Asset:
    return Asset(id=row.id, code=row.code, scale=row.scale)


def get_asset(conn: Connection, code: str) -> Asset | None:
    """The asset with ``code``."""
    row = conn.execute(sa.select(t.assets).where(t.assets.c.code == code)).first()
    return _asset(row) if row else None


def insert_asset(conn: Connection, code: str, scale: int) -> None:
    """Insert an asset unless it exists."""
    conn.execute(
        sa.text("INSERT INTO assets (code, scale) VALUES (:c, :s) ON CONFLICT (code) DO NOTHING"),
        {"c": code, "s": scale},
    )


_ACCOUNT_COLUMNS = (
    "a.id, a.code, a.type, a.debits_must_not_exceed_credits, a.credits_must_not_exceed_debits, "
    "s.id AS asset_id, s.code AS asset_code, s.scale"
)


def _account(row: Any) -> Account:
    return Account(
        id=row.id,
        code=row.code,
        asset=Asset(id=row.asset_id, code=row.asset_code, scale=row.scale),
        type=AccountType(row.type),
        debits_must_not_exceed_credits=row.debits_must_not_exceed_credits,
        credits_must_not_exceed_debits=row.credits_must_not_exceed_debits,
    )


def get_account(conn: Connection, code: str, asset_code: str) -> Account | None:
    """The account ``code`` in ``asset_code``."""
    row = conn.execute(
        sa.text(
            f"SELECT {_ACCOUNT_COLUMNS} FROM accounts a JOIN assets s ON s.id = a.asset_id "
            "WHERE a.code = :code AND s.code = :asset"
        ),
        {"code": code, "asset": asset_code},
    ).first()
    return _account(row) if row else None


def get_accounts_by_id(conn: Connection, ids: Sequence[int]) -> dict[int, Account]:
    """Accounts by id."""
    rows = conn.execute(
        sa.text(
            f"SELECT {_ACCOUNT_COLUMNS} FROM accounts a JOIN assets s ON s.id = a.asset_id "
            "WHERE a.id = ANY(:ids)"
        ),
        {"ids": list(ids)},
    )
    return {r.id: _account(r) for r in rows}


def find_accounts(conn: Connection, codes: Sequence[str]) -> list[Account]:
    """Accounts whose code is one of ``codes``, in any asset, ordered by asset and code."""
    rows = conn.execute(
        sa.text(
            f"SELECT {_ACCOUNT_COLUMNS} FROM accounts a JOIN assets s ON s.id = a.asset_id "
            "WHERE a.code = ANY(:codes) ORDER BY s.code, a.code"
        ),
        {"codes": list(codes)},
    )
    return [_account(r) for r in rows]


def insert_account(
    conn: Connection, code: str, asset_id: int, type_: str, dnec: bool, cned: bool
) -> None:
    """Insert an account (its balance row is created by a trigger) unless it exists."""
    conn.execute(
        sa.text(
            "INSERT INTO accounts (code, asset_id, type, debits_must_not_exceed_credits, "
            "credits_must_not_exceed_debits) VALUES (:c, :a, :t, :d, :k) "
            "ON CONFLICT (code, asset_id) DO NOTHING"
        ),
        {"c": code, "a": asset_id, "t": type_, "d": dnec, "k": cned},
    )


# --- posting --------------------------------------------------------------------------------


_POST_SQL = (
    "SELECT item, status, transaction_id FROM ledger_post_arrays(%s::text[], %s::text[], "
    "%s::text[], %s::text[], %s::timestamptz[], %s::text[], %s::text[], %s::bigint[], "
    "%s::boolean[], %s::jsonb[], %s::int[], %s::bigint[], %s::int[], %s::numeric[], "
    "%s::bigint[], %s::bigint[])"
)


def _quoted(value: str) -> str:
    if '"' in value or "\\" in value:
        value = value.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + value + '"'


def _text_array(values: list[Any]) -> str:
    return "{" + ",".join("NULL" if v is None else _quoted(v) for v in values) + "}"


def _time_array(values: list[Any]) -> str:
    return "{" + ",".join('"' + v.isoformat() + '"' for v in values) + "}"


def _int_array(values: list[Any]) -> str:
    return "{" + ",".join("NULL" if v is None else str(v) for v in values) + "}"


def _bool_array(values: list[Any]) -> str:
    return "{" + ",".join("t" if v else "f" for v in values) + "}"


#: How each of ``model.to_arrays``' arrays is written as a PostgreSQL array literal.
_ARRAY_FORMS = (_text_array, _text_array, _text_array, _text_array, _time_array, _text_array,
                _text_array, _int_array, _bool_array, _text_array, _int_array, _int_array,
                _int_array, _text_array, _int_array, _int_array)


def _post_params(arrays: PostArrays) -> tuple[str, ...]:
    """The arrays as literals, one text parameter each: psycopg's generic list adaptation cost
    the client more than the rest of a post (about 300 us for the 16 lists of one entry)."""
    return tuple(form(values) for form, values in zip(_ARRAY_FORMS, arrays, strict=True))


def _post_batch_rows(rows: Sequence[Any], count: int) -> list[tuple[str, int | None]]:
    assert len(rows) == count, "ledger_post_arrays returned a result per item"
    return [(r[1], r[2]) for r in sorted(rows, key=lambda r: r[0])]


def post_batch(conn: Connection, arrays: PostArrays) -> list[tuple[str, int | None]]:
    """Call ``ledger_post_arrays``; one (status, transaction id) per entry, in order."""
    rows = driver_rows(conn, _POST_SQL, _post_params(arrays))
    return _post_batch_rows(rows, len(arrays[0]))


def post_batch_alone(engine: Engine, arrays: PostArrays) -> list[tuple[str, int | None]]:
    """``post_batch`` as one autocommit statement of its own (``_alone``)."""
    rows = _alone(engine, _POST_SQL, _post_params(arrays))
    return _post_batch_rows(rows, len(arrays[0]))


_POST_ONE_SQL = (
    "SELECT status, transaction_id FROM ledger_post_one(%s, %s, %s, %s, %s::timestamptz, %s, "
    "%s, %s::boolean, %s::jsonb, %s::bigint[], %s::int[], %s::numeric[])"
)


def post_one(conn: Connection, params: OneParams) -> tuple[str, int | None]:
    """Call ``ledger_post_one`` (``model.to_one_params``): the entry's (status, transaction id)."""
    return _one_row(driver_rows(conn, _POST_ONE_SQL, _one_params(params)))


def post_one_alone(engine: Engine, params: OneParams) -> tuple[str, int | None]:
    """``post_one`` as one autocommit statement of its own (``_alone``)."""
    return _one_row(_alone(engine, _POST_ONE_SQL, _one_params(params)))


def _one_row(rows: Sequence[Any]) -> tuple[str, int | None]:
    assert len(rows) == 1, "ledger_post_one returns one row"
    return rows[0][0], rows[0][1]


def _one_params(params: OneParams) -> tuple[Any, ...]:
    """Every parameter as text, the line arrays as literals (see ``_post_params``): psycopg's
    dumpers for a datetime and a bool cost more than formatting them here."""
    key, fp, kind, ref, eff, reason, source, oop, meta, accounts, assets, amounts = params
    return (key, fp, kind, ref, eff.isoformat(), reason, source, "t" if oop else "f", meta,
            _int_array(accounts), _int_array(assets), _int_array(amounts))


#: Key of the psycopg cursor ``_alone`` keeps in a pooled connection's ``info``.
_CURSOR = "ledger.repository.cursor"


def _alone(engine: Engine, statement: str, params: tuple[Any, ...]) -> list[Any]:
    """Run a post function as one autocommit statement of its own: the call and the commit are
    a single round trip, so the balance rows are not held while a COMMIT travels from the
    client.

    It talks to the pooled psycopg connection directly: SQLAlchemy's execution layer cost the
    client more CPU per call than all the rest of a post (validation, fingerprint, JSON, the
    driver call; measured in bench/RESULTS.md), and clients may share the machine with the
    server. Errors are re-raised as SQLAlchemy's ``DBAPIError`` subclasses, as from any other
    repository function.
    """
    raw = engine.raw_connection()
    try:
        driver = raw.driver_connection
        assert driver is not None
        # One cursor per connection, kept with it (a new one per call cost ~15 us).
        cursor = raw.info.get(_CURSOR)
        if cursor is None or cursor.closed:
            cursor = raw.info[_CURSOR] = driver.cursor()
        driver.autocommit = True
        try:
            rows: list[Any] = cursor.execute(statement, params).fetchall()
        except engine.dialect.loaded_dbapi.Error as exc:
            if driver.broken:
                raw.invalidate(exc)
            raise sa_exc.DBAPIError.instance(
                statement, None, exc, engine.dialect.loaded_dbapi.Error
            ) from exc
        finally:
            if not driver.broken:
                driver.autocommit = False
    finally:
        raw.close()
    return rows


def get_transaction(conn: Connection, transaction_id: int) -> TransactionRecord | None:
    """A transaction with its postings, or None."""
    row = conn.execute(
        sa.select(t.ledger_transactions).where(t.ledger_transactions.c.id == transaction_id)
    ).first()
    if row is None:
        return None
    postings = conn.execute(
        sa.select(t.ledger_postings)
        .where(t.ledger_postings.c.transaction_id == transaction_id)
        .order_by(t.ledger_postings.c.line_no)
    ).all()
    return TransactionRecord(
        id=row.id,
        idempotency_key=row.idempotency_key,
        kind=row.kind,
        reference=row.reference,
        effective_at=row.effective_at,
        recorded_at=row.recorded_at,
        reason=row.reason,
        source=row.source,
        reverses_transaction_id=row.reverses_transaction_id,
        out_of_period=row.out_of_period,
        metadata=dict(row.metadata),
        postings=tuple(
            PostingRecord(
                id=p.id,
                transaction_id=p.transaction_id,
                line_no=p.line_no,
                account_id=p.account_id,
                amount_minor=to_int(p.amount),
                closes_posting_id=p.closes_posting_id,
                reverses_posting_id=p.reverses_posting_id,
            )
            for p in postings
        ),
    )


def get_transaction_id_by_key(conn: Connection, key: str) -> int | None:
    """The transaction posted under idempotency ``key``, if any."""
    return conn.execute(
        sa.select(t.ledger_transactions.c.id).where(t.ledger_transactions.c.idempotency_key == key)
    ).scalar()


# --- balances -------------------------------------------------------------------------------


def stored_balances(conn: Connection, account_ids: Sequence[int]) -> dict[int, tuple[int, int]]:
    """(raw balance, version) of the stored projection, per account id."""
    rows = conn.execute(
        sa.select(
            t.account_balances.c.account_id,
            t.account_balances.c.balance,
            t.account_balances.c.version,
        ).where(t.account_balances.c.account_id.in_(list(account_ids)))
    )
    return {r.account_id: (to_int(r.balance), r.version) for r in rows}


def stored_balances_by_code(
    conn: Connection, codes: Sequence[str]
) -> list[tuple[Account, int, int]]:
    """(account, raw balance, version) of the accounts whose code is one of ``codes``, in any
    asset, ordered by asset and code: ``find_accounts`` and ``stored_balances`` in one statement
    (the hot read of a user's balances).

    ``IN (%(c0)s, %(c1)s)`` rather than ``= ANY(%(codes)s)``: with one parameter per code, the
    generic plan of the prepared statement knows it looks up two codes and uses the index, so
    the statement is planned once per connection instead of at every call.

    It runs on ``conn``'s psycopg connection directly (same connection, same transaction), as a
    statement prepared at its first call: SQLAlchemy's execution layer cost more client CPU than
    the statement itself (about 150 of 200 µs; bench/RESULTS.md, "HTTP API"). Errors are
    re-raised as SQLAlchemy's ``DBAPIError`` subclasses, as from any other repository function.
    """
    if not codes:
        return []
    params = {f"c{i}": code for i, code in enumerate(codes)}
    sql = _STORED_BALANCES_SQL.format(codes=", ".join(f"%({name})s" for name in params))
    rows = driver_rows(conn, sql, params, prepare=True)
    return [(Account(id=r[0], code=r[1], asset=Asset(id=r[5], code=r[6], scale=r[7]),
                     type=AccountType(r[2]), debits_must_not_exceed_credits=r[3],
                     credits_must_not_exceed_debits=r[4]), to_int(r[8]), int(r[9]))
            for r in rows]


#: ``stored_balances_by_code``'s statement (psycopg placeholders; ``{codes}``: one per code).
_STORED_BALANCES_SQL = (
    f"SELECT {_ACCOUNT_COLUMNS}, coalesce(b.balance, 0) AS balance, "
    "coalesce(b.version, 0) AS version "
    "FROM accounts a JOIN assets s ON s.id = a.asset_id "
    "LEFT JOIN account_balances b ON b.account_id = a.id "
    "WHERE a.code IN ({codes}) ORDER BY s.code, a.code"
)


def balances_at(
    conn: Connection,
    account_ids: Sequence[int],
    as_of: datetime | None,
    known_at: datetime | None,
) -> dict[int, tuple[int, int]]:
    """(raw balance, transactions counted) per account from the postings, bitemporally.

    ``as_of`` bounds the effective time (inclusive), ``known_at`` the recorded time (inclusive);
    None means no bound.
    """
    rows = conn.execute(
        sa.text(
            "SELECT p.account_id, sum(p.amount) AS total, count(DISTINCT p.transaction_id) AS n "
            "FROM ledger_postings p JOIN ledger_transactions x ON x.id = p.transaction_id "
            "WHERE p.account_id = ANY(:ids) "
            "AND (CAST(:as_of AS timestamptz) IS NULL OR x.effective_at <= :as_of) "
            "AND (CAST(:known AS timestamptz) IS NULL OR x.recorded_at <= :known) "
            "GROUP BY p.account_id"
        ),
        {"ids": list(account_ids), "as_of": as_of, "known": known_at},
    )
    found = {r.account_id: (to_int(r.total), int(r.n)) for r in rows}
    return {a: found.get(a, (0, 0)) for a in account_ids}


# --- periods --------------------------------------------------------------------------------


@dataclass(frozen=True)
class PeriodRecord:
    """A closed period: everything effective before ``ends_at`` is closed as of ``closed_at``."""

    id: int
    ends_at: datetime
    closed_at: datetime
    closed_by: str
    reason: str | None


def insert_period(
    conn: Connection, ends_at: datetime, closed_by: str, reason: str | None
) -> PeriodRecord:
    """Close the ledger through ``ends_at`` (the trigger waits for postings in flight)."""
    row = conn.execute(
        sa.insert(t.ledger_periods)
        .values(ends_at=ends_at, closed_by=closed_by, reason=reason)
        .returning(*t.ledger_periods.c)
    ).one()
    return PeriodRecord(row.id, row.ends_at, row.closed_at, row.closed_by, row.reason)


@dataclass(frozen=True)
class PeriodProposalRecord:
    """A proposed period close; ``period_id`` and ``approved_by`` once approved (closed)."""

    id: int
    ends_at: datetime
    reason: str | None
    proposed_by: str
    proposed_at: datetime
    approved_by: str | None
    approved_at: datetime | None
    period_id: int | None


def insert_period_proposal(
    conn: Connection, ends_at: datetime, proposed_by: str, reason: str | None
) -> PeriodProposalRecord:
    """Record a proposal to close the ledger through ``ends_at``."""
    row = conn.execute(sa.text(
        "INSERT INTO ledger_period_proposals (ends_at, reason, proposed_by) "
        "VALUES (:e, :r, :b) RETURNING id, ends_at, reason, proposed_by, proposed_at"),
        {"e": ends_at, "r": reason, "b": proposed_by}).one()
    return PeriodProposalRecord(row.id, row.ends_at, row.reason, row.proposed_by,
                                row.proposed_at, None, None, None)


def get_period_proposal(
    conn: Connection, proposal_id: int, *, lock: bool = False
) -> PeriodProposalRecord | None:
    """A proposal with its approval, if any; ``lock``: first take the proposal's advisory lock
    (namespace 7304, until the end of the transaction), so that concurrent approvals of it are
    judged one after the other (the tables are append-only: no row lock to take)."""
    if lock:
        conn.execute(sa.text("SELECT pg_advisory_xact_lock(7304, :id)"), {"id": proposal_id})
    row = conn.execute(sa.text(
        "SELECT p.id, p.ends_at, p.reason, p.proposed_by, p.proposed_at, a.approved_by, "
        "a.approved_at, a.period_id FROM ledger_period_proposals p "
        "LEFT JOIN ledger_period_approvals a ON a.proposal_id = p.id WHERE p.id = :id"),
        {"id": proposal_id}).first()
    if row is None:
        return None
    return PeriodProposalRecord(row.id, row.ends_at, row.reason, row.proposed_by,
                                row.proposed_at, row.approved_by, row.approved_at, row.period_id)


def insert_period_approval(
    conn: Connection, proposal_id: int, period_id: int, approved_by: str
) -> None:
    """Record the approval that closed ``period_id`` (the trigger checks the two people)."""
    conn.execute(sa.text(
        "INSERT INTO ledger_period_approvals (proposal_id, period_id, approved_by) "
        "VALUES (:p, :i, :b)"), {"p": proposal_id, "i": period_id, "b": approved_by})


def database_now(conn: Connection) -> datetime:
    """The database's clock (what the period close trigger compares with)."""
    return conn.execute(sa.text("SELECT clock_timestamp()")).scalar_one()  # type: ignore[no-any-return]


def latest_period(conn: Connection) -> PeriodRecord | None:
    """The newest closed period."""
    row = conn.execute(
        sa.select(t.ledger_periods).order_by(t.ledger_periods.c.ends_at.desc()).limit(1)
    ).first()
    return (
        PeriodRecord(row.id, row.ends_at, row.closed_at, row.closed_by, row.reason) if row else None
    )


# --- integrity: checkpoints, replay, rebuild ------------------------------------------------------


@dataclass(frozen=True)
class CheckpointRecord:
    """A balance checkpoint covering every posting with id <= ``through_posting_id``."""

    id: int
    through_posting_id: int
    verified: bool
    accounts_count: int
    digest: str
    created_at: datetime


def newest_verified_checkpoint(conn: Connection) -> CheckpointRecord | None:
    """The newest checkpoint whose replay agreed with the stored balances."""
    row = conn.execute(
        sa.select(t.balance_checkpoints)
        .where(t.balance_checkpoints.c.verified)
        .order_by(
            t.balance_checkpoints.c.through_posting_id.desc(), t.balance_checkpoints.c.id.desc()
        )
        .limit(1)
    ).first()
    if row is None:
        return None
    return CheckpointRecord(
        row.id, row.through_posting_id, row.verified, row.accounts_count, row.digest, row.created_at
    )


def posting_watermark(conn: Connection) -> int:
    """The highest posting id such that no posting with a lower or equal id is still in flight.

    Takes the ledger write gate exclusively (every posting transaction holds it shared until it
    commits), so it briefly waits for writes in flight; commit right after to release it.
    """
    conn.execute(sa.text("SELECT pg_advisory_xact_lock(7301, 1)"))
    return int(
        conn.execute(sa.text("SELECT coalesce(max(id), 0) FROM ledger_postings")).scalar_one()
    )


# Balances of every account replayed from checkpoint :cp (0 = none) plus postings in (:lo, :hi].
_REPLAY_CTE = """
replay AS (
  SELECT coalesce(e.account_id, d.account_id) AS account_id,
         coalesce(e.balance, 0) + coalesce(d.total, 0) AS balance,
         coalesce(e.version, 0) + coalesce(d.txns, 0) AS version
    FROM (SELECT account_id, balance, version FROM balance_checkpoint_entries
           WHERE checkpoint_id = :cp) e
    FULL JOIN (SELECT account_id, sum(amount) AS total, count(DISTINCT transaction_id) AS txns
                 FROM ledger_postings WHERE id > :lo AND id <= :hi
                 AND (CAST(:ids AS bigint[]) IS NULL OR account_id = ANY(:ids))
                GROUP BY account_id) d
      ON d.account_id = e.account_id
   WHERE CAST(:ids AS bigint[]) IS NULL OR coalesce(e.account_id, d.account_id) = ANY(:ids)
)
"""

_DIGEST_SQL = (
    "encode(sha256(convert_to('through=' || CAST(:hi AS text) || E'\\n' || coalesce(string_agg("
    "r.account_id || ':' || r.balance || ':' || r.version, E'\\n' ORDER BY r.account_id), ''), "
    "'UTF8')), 'hex')"
)

_NO_LIMIT = 2**62


def replay_params(
    checkpoint: CheckpointRecord | None, hi: int | None = None, ids: Sequence[int] | None = None
) -> dict[str, Any]:
    """Parameters of the replay query for a base checkpoint and an upper posting id."""
    return {
        "cp": checkpoint.id if checkpoint else 0,
        "lo": checkpoint.through_posting_id if checkpoint else 0,
        "hi": _NO_LIMIT if hi is None else hi,
        "ids": list(ids) if ids is not None else None,
    }


def insert_checkpoint(
    conn: Connection, base: CheckpointRecord | None, through: int
) -> CheckpointRecord:
    """Write a checkpoint through posting ``through``: base + postings in (base, through].

    Run in a REPEATABLE READ transaction: the digest, the verification and the entries are all
    computed from one snapshot. Verified means: stored balances = checkpoint + later postings.
    """
    params = replay_params(base, through)
    digest, count = conn.execute(
        sa.text(
            f"WITH {_REPLAY_CTE} SELECT {_DIGEST_SQL}, count(*) FROM replay r "
            "WHERE r.balance <> 0 OR r.version <> 0"
        ),
        params,
    ).one()
    drift = conn.execute(
        sa.text(
            f"WITH {_REPLAY_CTE}, later AS ("
            "  SELECT account_id, sum(amount) AS total, count(DISTINCT transaction_id) AS txns"
            "  FROM ledger_postings WHERE id > :hi GROUP BY account_id)"
            " SELECT count(*) FROM accounts a"
            " LEFT JOIN replay r ON r.account_id = a.id"
            " LEFT JOIN later l ON l.account_id = a.id"
            " LEFT JOIN account_balances b ON b.account_id = a.id"
            " WHERE b.account_id IS NULL"
            "    OR b.balance <> coalesce(r.balance, 0) + coalesce(l.total, 0)"
            "    OR b.version <> coalesce(r.version, 0) + coalesce(l.txns, 0)"
        ),
        params,
    ).scalar_one()
    row = conn.execute(
        sa.insert(t.balance_checkpoints)
        .values(
            through_posting_id=through, verified=drift == 0, accounts_count=count, digest=digest
        )
        .returning(*t.balance_checkpoints.c)
    ).one()
    conn.execute(
        sa.text(
            f"WITH {_REPLAY_CTE} INSERT INTO balance_checkpoint_entries "
            "(checkpoint_id, account_id, balance, version) "
            "SELECT :new, r.account_id, r.balance, r.version FROM replay r "
            "WHERE r.balance <> 0 OR r.version <> 0"
        ),
        {**params, "new": row.id},
    )
    return CheckpointRecord(
        row.id, row.through_posting_id, row.verified, row.accounts_count, row.digest, row.created_at
    )


def checkpoint_digest(conn: Connection, checkpoint: CheckpointRecord) -> str:
    """Recompute the digest of a checkpoint's stored entries."""
    return str(
        conn.execute(
            sa.text(
                f"SELECT {_DIGEST_SQL} FROM balance_checkpoint_entries r "
                "WHERE r.checkpoint_id = :cp"
            ),
            {"cp": checkpoint.id, "hi": checkpoint.through_posting_id},
        ).scalar_one()
    )


@dataclass(frozen=True)
class AccountState:
    """One account with its stored and replayed balances (raw, debit positive)."""

    account_id: int
    code: str
    asset_code: str
    type: str
    dnec: bool
    cned: bool
    stored: int | None
    stored_version: int | None
    replayed: int
    replayed_version: int


def account_states(conn: Connection, base: CheckpointRecord | None) -> list[AccountState]:
    """Every account with its stored balance and its replay from ``base``."""
    rows = conn.execute(
        sa.text(
            f"WITH {_REPLAY_CTE} SELECT a.id, a.code, s.code AS asset_code, a.type,"
            " a.debits_must_not_exceed_credits AS dnec, a.credits_must_not_exceed_debits AS cned,"
            " b.balance AS stored, b.version AS stored_version,"
            " coalesce(r.balance, 0) AS replayed, coalesce(r.version, 0) AS replayed_version"
            " FROM accounts a JOIN assets s ON s.id = a.asset_id"
            " LEFT JOIN replay r ON r.account_id = a.id"
            " LEFT JOIN account_balances b ON b.account_id = a.id ORDER BY a.id"
        ),
        replay_params(base),
    )
    return [
        AccountState(
            r.id,
            r.code,
            r.asset_code,
            r.type,
            r.dnec,
            r.cned,
            None if r.stored is None else to_int(r.stored),
            r.stored_version,
            to_int(r.replayed),
            int(r.replayed_version),
        )
        for r in rows
    ]


def unbalanced_transactions(conn: Connection, after_posting_id: int) -> list[tuple[int, str, int]]:
    """(transaction id, asset code, sum) of transactions that do not balance in an asset."""
    rows = conn.execute(
        sa.text(
            "SELECT p.transaction_id, s.code, sum(p.amount) AS total FROM ledger_postings p"
            " JOIN assets s ON s.id = p.asset_id"
            " WHERE p.transaction_id IN (SELECT transaction_id FROM ledger_postings WHERE id > :lo)"
            " GROUP BY p.transaction_id, s.code HAVING sum(p.amount) <> 0"
            " ORDER BY p.transaction_id"
        ),
        {"lo": after_posting_id},
    )
    return [(r.transaction_id, r.code, to_int(r.total)) for r in rows]


def transactions_without_postings(conn: Connection) -> list[int]:
    """Ledger transactions that have no postings at all."""
    rows = conn.execute(
        sa.text(
            "SELECT x.id FROM ledger_transactions x WHERE NOT EXISTS"
            " (SELECT 1 FROM ledger_postings p WHERE p.transaction_id = x.id) ORDER BY x.id"
        )
    )
    return [r.id for r in rows]


def over_consumed_postings(conn: Connection) -> list[tuple[str, int, int, int]]:
    """(kind, original posting id, original amount, consumed) where reversals or closings of a
    posting exceed it, or have the same sign."""
    rows = conn.execute(
        sa.text(
            "SELECT 'reversed' AS kind, o.id, o.amount, sum(p.amount) AS used"
            " FROM ledger_postings p JOIN ledger_postings o ON o.id = p.reverses_posting_id"
            " GROUP BY o.id, o.amount"
            " HAVING abs(sum(p.amount)) > abs(o.amount) OR sign(sum(p.amount)) = sign(o.amount)"
            " UNION ALL "
            "SELECT 'closed', o.id, o.amount, sum(p.amount) FROM ledger_postings p"
            " JOIN ledger_postings o ON o.id = p.closes_posting_id GROUP BY o.id, o.amount"
            " HAVING abs(sum(p.amount)) > abs(o.amount) OR sign(sum(p.amount)) = sign(o.amount)"
        )
    )
    return [(r.kind, r.id, to_int(r.amount), to_int(r.used)) for r in rows]


def account_ids(conn: Connection) -> list[int]:
    """Every account id, ascending."""
    return [r[0] for r in conn.execute(sa.text("SELECT id FROM accounts ORDER BY id"))]


def lock_balances_for_rebuild(conn: Connection, ids: Sequence[int]) -> dict[int, tuple[int, int]]:
    """Create missing balance rows of ``ids``, lock all of them in id order, return them.

    Holding these row locks means every posting of these accounts has committed (and is visible
    to the next statement) or waits for us: the replay that follows cannot miss one.
    """
    conn.execute(
        sa.text(
            "INSERT INTO account_balances (account_id, asset_id, debits_must_not_exceed_credits,"
            " credits_must_not_exceed_debits)"
            " SELECT a.id, a.asset_id, a.debits_must_not_exceed_credits,"
            " a.credits_must_not_exceed_debits FROM accounts a WHERE a.id = ANY(:ids)"
            " ON CONFLICT (account_id) DO NOTHING"
        ),
        {"ids": list(ids)},
    )
    rows = conn.execute(
        sa.text(
            "SELECT account_id, balance, version FROM account_balances"
            " WHERE account_id = ANY(:ids) ORDER BY account_id FOR UPDATE"
        ),
        {"ids": list(ids)},
    )
    return {r.account_id: (to_int(r.balance), r.version) for r in rows}


def replay_accounts(
    conn: Connection, base: CheckpointRecord | None, ids: Sequence[int]
) -> dict[int, tuple[int, int]]:
    """(balance, version) of ``ids`` replayed from ``base`` and every later posting."""
    rows = conn.execute(
        sa.text(f"WITH {_REPLAY_CTE} SELECT account_id, balance, version FROM replay"),
        replay_params(base, None, ids),
    )
    found = {r.account_id: (to_int(r.balance), int(r.version)) for r in rows}
    return {a: found.get(a, (0, 0)) for a in ids}


def set_balances(conn: Connection, values: dict[int, tuple[int, int]]) -> None:
    """Overwrite stored balances (rebuild only; the rows are locked by the caller)."""
    conn.execute(
        sa.text(
            "UPDATE account_balances b SET balance = CAST(v.balance AS numeric),"
            " version = v.version, updated_at = now()"
            " FROM (SELECT unnest(CAST(:ids AS bigint[])) AS account_id,"
            " unnest(CAST(:bals AS text[])) AS balance,"
            " unnest(CAST(:vers AS bigint[])) AS version) v"
            " WHERE b.account_id = v.account_id"
        ),
        {
            "ids": list(values),
            "bals": [str(v[0]) for v in values.values()],
            "vers": [v[1] for v in values.values()],
        },
    )


# --- statements -----------------------------------------------------------------------------


@dataclass(frozen=True)
class StatementRow:
    """One posting on a statement, with its transaction's descriptive fields."""

    posting_id: int
    transaction_id: int
    account_id: int
    amount_minor: int
    kind: str
    reference: str | None
    reason: str | None
    effective_at: datetime
    recorded_at: datetime


def sums_through(conn: Connection, account_ids: Sequence[int], posting_id: int) -> dict[int, int]:
    """Raw balance per account from its postings with id <= ``posting_id``."""
    rows = conn.execute(
        sa.text(
            "SELECT account_id, sum(amount) AS total FROM ledger_postings"
            " WHERE account_id = ANY(:ids) AND id <= :through GROUP BY account_id"
        ),
        {"ids": list(account_ids), "through": posting_id},
    )
    found = {r.account_id: to_int(r.total) for r in rows}
    return {a: found.get(a, 0) for a in account_ids}


def postings_after(
    conn: Connection, account_ids: Sequence[int], after_posting_id: int, limit: int
) -> list[StatementRow]:
    """The next ``limit`` postings of ``account_ids`` after ``after_posting_id``, by id."""
    rows = conn.execute(
        sa.text(
            "SELECT p.id, p.transaction_id, p.account_id, p.amount, x.kind, x.reference,"
            " x.reason, x.effective_at, x.recorded_at"
            " FROM ledger_postings p JOIN ledger_transactions x ON x.id = p.transaction_id"
            " WHERE p.account_id = ANY(:ids) AND p.id > :after ORDER BY p.id LIMIT :limit"
        ),
        {"ids": list(account_ids), "after": after_posting_id, "limit": limit},
    )
    return [
        StatementRow(r.id, r.transaction_id, r.account_id, to_int(r.amount), r.kind,
                     r.reference, r.reason, r.effective_at, r.recorded_at)
        for r in rows
    ]
