"""The calls of the two write functions, ``ledger_post_arrays`` and ``ledger_post_one``,
and the SQL argument formats they take (built here from ``model.Entry``, so that the model
stays free of SQL formats).

Hot path: both calls run on the psycopg connection directly (``driver_rows`` in a unit of work,
``_alone`` as an autocommit statement of its own), with every parameter sent as text.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Connection, Engine

from config.database import DriverResult, driver_rows, driver_send
from config.uow import UNREPLICATED, unreplicated_commit_in_doubt
from ledger.model import Entry, fingerprint, fingerprint_at, fingerprint_tail

#: Parameter arrays of ``ledger_post_arrays``: one element per entry, then one per line.
PostArrays = tuple[list[Any], ...]


def to_arrays(entries: Sequence[Entry], *, fingerprints: bool = True,
              metadata: Sequence[str] | None = None) -> PostArrays:
    """What ``ledger_post_arrays`` takes: 11 arrays with one element per entry (key,
    fingerprint, kind, reference, effective time, reason, source, reversed transaction,
    out-of-period flag, metadata as JSON text, number of lines), then 5 with one per line, entry
    by entry (account id, asset id, amount as a decimal string, closed and reversed posting).
    ``fingerprints=False`` leaves the fingerprints out (empty strings: ``prepare``);
    ``metadata``: each entry's metadata as JSON text already (``ledger.model.metadata_json``)."""
    keys: list[Any] = []
    fps: list[Any] = []
    kinds: list[Any] = []
    refs: list[Any] = []
    effs: list[Any] = []
    reasons: list[Any] = []
    sources: list[Any] = []
    revs: list[Any] = []
    oops: list[Any] = []
    metas: list[Any] = []
    counts: list[Any] = []
    accounts: list[Any] = []
    assets: list[Any] = []
    amounts: list[Any] = []
    closes: list[Any] = []
    reverses: list[Any] = []
    for n, entry in enumerate(entries):
        keys.append(entry.idempotency_key)
        fps.append(fingerprint(entry) if fingerprints else "")
        kinds.append(entry.kind)
        refs.append(entry.reference)
        effs.append(entry.effective_at)
        reasons.append(entry.reason)
        sources.append(entry.source)
        revs.append(entry.reverses_transaction_id)
        oops.append(entry.out_of_period)
        if metadata is not None:
            metas.append(metadata[n])
        else:
            metas.append(json.dumps(dict(entry.metadata)) if entry.metadata else "{}")
        counts.append(len(entry.lines))
        for line in entry.lines:
            accounts.append(line.account.id)
            assets.append(line.account.asset.id)
            amounts.append(str(line.amount_minor))
            closes.append(line.closes_posting_id)
            reverses.append(line.reverses_posting_id)
    return (keys, fps, kinds, refs, effs, reasons, sources, revs, oops, metas, counts,
            accounts, assets, amounts, closes, reverses)


#: Parameters of ``ledger_post_one``: key, fingerprint, kind, reference, effective time, reason,
#: source, out-of-period flag, metadata as JSON text, then the lines' account ids, asset ids and
#: amounts (decimal strings).
OneParams = tuple[Any, ...]


def is_plain(entry: Entry) -> bool:
    """Whether ``entry`` reverses and closes nothing: what ``ledger_post_one`` takes."""
    return entry.reverses_transaction_id is None and all(
        line.closes_posting_id is None and line.reverses_posting_id is None
        for line in entry.lines)


def to_one_params(entry: Entry) -> OneParams:
    """What ``ledger_post_one`` takes for a plain entry (``is_plain``)."""
    assert is_plain(entry), "entries that reverse or close go through ledger_post_arrays"
    return (entry.idempotency_key, fingerprint(entry), entry.kind, entry.reference,
            entry.effective_at, entry.reason, entry.source, entry.out_of_period,
            json.dumps(dict(entry.metadata)) if entry.metadata else "{}",
            [line.account.id for line in entry.lines],
            [line.account.asset.id for line in entry.lines],
            [str(line.amount_minor) for line in entry.lines])


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


#: How each of ``to_arrays``' arrays is written as a PostgreSQL array literal.
_ARRAY_FORMS = (_text_array, _text_array, _text_array, _text_array, _time_array, _text_array,
                _text_array, _int_array, _bool_array, _text_array, _int_array, _int_array,
                _int_array, _text_array, _int_array, _int_array)


def _post_params(arrays: PostArrays) -> tuple[str, ...]:
    """The arrays as literals, one text parameter each: psycopg's generic list adaptation cost
    the client more than the rest of a post (about 300 us for the 16 lists of one entry)."""
    return tuple(form(values) for form, values in zip(_ARRAY_FORMS, arrays, strict=True))


@dataclass(frozen=True)
class PreparedPost:
    """A ``ledger_post_arrays`` call built before its entries' effective time is known: every
    argument but the fingerprints and the effective times (``params`` holds None there) and
    each entry's :func:`~ledger.model.fingerprint_tail`. :func:`post_prepared` completes it
    for one effective time shared by every entry; building the rest (key, metadata, lines,
    fingerprint forms) is most of the client's work for a batch, and a caller can do it
    ahead, outside its transaction (the deposit watcher, on its planner thread)."""

    entries: tuple[Entry, ...]
    params: tuple[str | None, ...]
    tails: tuple[str, ...]


#: Positions of the fingerprints and of the effective times among ``to_arrays``' arrays.
_FINGERPRINTS, _EFFECTIVE = 1, 4


def prepare(entries: Sequence[Entry], metadata: Sequence[str]) -> PreparedPost:
    """``entries`` as a :class:`PreparedPost` (their own effective times are not used), with
    their metadata serialized (``ledger.model.metadata_json``)."""
    tails = tuple(fingerprint_tail(e, metadata_json=m)
                  for e, m in zip(entries, metadata, strict=True))
    arrays = list(to_arrays(entries, fingerprints=False, metadata=metadata))
    params: list[str | None] = list(_post_params(tuple(arrays)))
    params[_FINGERPRINTS] = params[_EFFECTIVE] = None
    return PreparedPost(tuple(entries), tuple(params), tails)


def send_prepared(conn: Connection, prepared: PreparedPost,
                  effective_at: datetime) -> tuple[DriverResult, list[str]]:
    """Send the ``ledger_post_arrays`` call of the prepared entries, every one effective at
    ``effective_at`` (in a ``config.database.driver_pipeline`` block, queued with the
    statements around it); :func:`prepared_results` reads its verdicts. With the entries'
    fingerprints."""
    fingerprints = [fingerprint_at(tail, effective_at) for tail in prepared.tails]
    params = list(prepared.params)
    params[_FINGERPRINTS] = "{" + ",".join(fingerprints) + "}"
    params[_EFFECTIVE] = _time_array([effective_at] * len(prepared.tails))
    return driver_send(conn, _POST_SQL, tuple(params)), fingerprints


def prepared_results(sent: DriverResult, prepared: PreparedPost) -> list[tuple[str, int | None]]:
    """(status, transaction id) per prepared entry, in order."""
    return _post_batch_rows(sent.rows(), len(prepared.tails))


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
    """Call ``ledger_post_one`` (``to_one_params``): the entry's (status, transaction id)."""
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
        raw.info.pop(UNREPLICATED, None)
        try:
            rows: list[Any] = cursor.execute(statement, params).fetchall()
            unreplicated_commit_in_doubt(raw.info, "the post")
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
