"""Custody provider statements (``custody reconcile provider FILE``, job
``reconcile.provider``): import a statement file, store it and its records (append-only, one
record per (provider, reference)), and match the provider's records of the statement's period
with ours, by reference only (``reconcile.provider_model``; formats and the clearing account in
``docs/provider-statements.md``).

Each reference is matched, has a different amount (or asset, or direction), is missing in the
ledger, or is ours and missing at the provider; every outcome but the first is a finding
(``provider_amount_mismatch``, ``provider_missing_in_ledger``,
``provider_missing_at_provider``), subject ``provider:<provider>:<reference>``. Per asset, the
clearing account's unexplained remainder is reported: what ``clearing:provider:<provider>``
holds plus what the unmatched references leave unbooked.

Importing the same file again stores nothing and finds the same findings (the caller's
``record_findings`` then updates their cases). A malformed file, or a record that repeats a
stored reference with other content, is refused before anything is written.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from config.errors import CustodyError
from config.uow import UnitOfWork
from reconcile.model import Finding
from reconcile.provider_model import (
    Format,
    Match,
    Outcome,
    Reconciliation,
    Statement,
    StatementInvalid,
    parse_statement,
    reconcile,
)
from reconcile.repository import provider as repo

#: The check's name: who opens its cases, and its job.
CHECK = "reconcile.provider"
#: The case type of each outcome that is a discrepancy.
FINDING_TYPES = {
    Outcome.AMOUNT_MISMATCH: "provider_amount_mismatch",
    Outcome.MISSING_IN_LEDGER: "provider_missing_in_ledger",
    Outcome.MISSING_AT_PROVIDER: "provider_missing_at_provider",
}
#: Bytes of a statement file read at most (it is parsed whole).
FILE_BYTES_MAX = 64 * 1024 * 1024


class ProviderStatementInvalid(CustodyError):
    """A statement file that cannot be imported (malformed, unreadable, too large); the
    message is one line naming where and why. Nothing was written."""

    code = "provider_statement_invalid"


class ProviderStatementConflict(CustodyError):
    """A statement repeats a reference already stored for its provider with other content.
    Nothing was written: a provider's correction is a new reference, not a changed record."""

    code = "provider_statement_conflict"


@dataclass(frozen=True)
class LoadedStatement:
    """A parsed statement file with the SHA-256 of its bytes and its name."""

    statement: Statement
    sha256: str
    file_name: str | None


@dataclass(frozen=True)
class Imported:
    """What an import stored: the statement's id, whether it is new (False: the same file was
    imported before), and how many records were new or already stored unchanged."""

    statement_id: int
    new: bool
    records_added: int
    records_known: int


@dataclass(frozen=True)
class ProviderCheck:
    """One provider's records of one period against ours."""

    provider: str
    statement_id: int
    period_start: datetime
    period_end: datetime
    reconciliation: Reconciliation

    @property
    def findings(self) -> list[Finding]:
        """One finding per reference that is not matched (per reference and asset when our
        side of one reference holds two assets: the subject then ends in ``:<asset>``)."""
        unmatched = [m for m in self.reconciliation.matches if m.outcome is not Outcome.MATCHED]
        keys = [(m.outcome, m.reference) for m in unmatched]
        return [_finding(self, m, by_asset=keys.count((m.outcome, m.reference)) > 1)
                for m in unmatched]


def _finding(check: ProviderCheck, m: Match, *, by_asset: bool) -> Finding:
    ours = m.ours
    subject = f"provider:{check.provider}:{m.reference}"
    side = m.theirs if m.theirs is not None else ours
    assert side is not None, m
    if by_asset:
        subject += f":{side.asset}"
    refs = {"provider": check.provider, "reference": m.reference,
            "statement_id": str(check.statement_id)}
    if ours is not None:
        refs["ledger_transactions"] = ",".join(str(i) for i in ours.transaction_ids)
    return Finding(
        type=FINDING_TYPES[m.outcome], subject=subject,
        refs=refs, expected=None if ours is None else str(ours.net_minor),
        observed=None if m.theirs is None else str(m.theirs.signed_minor),
        evidence={"check": "provider", "outcome": m.outcome.value, "fields": list(m.fields),
                  "units": "ledger minor units, signed as they move our custody (+ in)",
                  "period_start": check.period_start.isoformat(),
                  "period_end": check.period_end.isoformat(),
                  "provider_record": None if m.theirs is None else m.theirs.to_json(),
                  "ledger_record": None if ours is None else {
                      "asset": ours.asset, "net_minor": str(ours.net_minor),
                      "occurred_at": ours.occurred_at.isoformat(),
                      "transaction_ids": list(ours.transaction_ids)}})


def load_statement(path: Path, fmt: Format | None = None) -> LoadedStatement:
    """Read and parse a statement file (``fmt`` None: from its suffix, ``.csv`` or
    ``.json``); ProviderStatementInvalid with one line otherwise."""
    if fmt is None:
        suffix = path.suffix.lower().lstrip(".")
        if suffix not in ("csv", "json"):
            raise ProviderStatementInvalid(f"{path.name}: the format is not known from its "
                                           "suffix (.csv or .json); give --format")
        fmt = "csv" if suffix == "csv" else "json"
    try:
        with path.open("rb") as f:
            data = f.read(FILE_BYTES_MAX + 1)
    except OSError as exc:
        raise ProviderStatementInvalid(f"{path}: cannot be read: {exc.strerror}") from exc
    if len(data) > FILE_BYTES_MAX:
        raise ProviderStatementInvalid(f"{path.name}: larger than {FILE_BYTES_MAX} bytes")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ProviderStatementInvalid(f"{path.name}: not UTF-8 (byte {exc.start})") from exc
    try:
        statement = parse_statement(text, fmt)
    except StatementInvalid as exc:
        raise ProviderStatementInvalid(f"{path.name}: {exc}") from exc
    return LoadedStatement(statement, hashlib.sha256(data).hexdigest(), path.name)


def import_statement(uow: UnitOfWork, loaded: LoadedStatement, *, imported_by: str,
                     now: datetime) -> Imported:
    """Store a statement and its new records (in the caller's unit of work, not committed).
    The same file again stores nothing; a stored reference with other content raises
    ProviderStatementConflict before anything is written."""
    s = loaded.statement
    repo.lock_provider(uow.conn, s.provider)
    existing = repo.find_statement(uow.conn, s.provider, loaded.sha256)
    if existing is not None:
        return Imported(existing, False, 0, len(s.records))
    stored = repo.stored_records(uow.conn, s.provider, [r.reference for r in s.records])
    changed = [r for r in s.records if r.reference in stored and stored[r.reference] != r]
    if changed:
        first = changed[0]
        raise ProviderStatementConflict(
            f"{s.provider}: reference {first.reference!r} is stored with other content "
            f"({len(changed)} such record(s)); nothing was imported")
    statement_id = repo.insert_statement(uow.conn, s, sha256=loaded.sha256,
                                         file_name=loaded.file_name, imported_by=imported_by,
                                         imported_at=now)
    new = [r for r in s.records if r.reference not in stored]
    repo.insert_records(uow.conn, statement_id, new)
    return Imported(statement_id, True, len(new), len(s.records) - len(new))


def check(uow: UnitOfWork, provider: str, statement_id: int, period_start: datetime,
          period_end: datetime) -> ProviderCheck:
    """Match the provider's stored records of ``[period_start, period_end)`` with ours (pure
    matching on what the repository read)."""
    theirs = repo.records_in_period(uow.conn, provider, period_start, period_end)
    ours = repo.our_records(uow.conn, provider, period_start, period_end,
                            [r.reference for r in theirs])
    clearing = repo.clearing_balances(uow.conn, provider)
    return ProviderCheck(provider, statement_id, period_start, period_end,
                         reconcile(theirs, ours, clearing))


def run(uow: UnitOfWork, loaded: LoadedStatement, *, imported_by: str,
        now: datetime) -> tuple[Imported, ProviderCheck]:
    """Import a statement, then check its period (one unit of work, not committed)."""
    imported = import_statement(uow, loaded, imported_by=imported_by, now=now)
    s = loaded.statement
    return imported, check(uow, s.provider, imported.statement_id, s.period_start,
                           s.period_end)


def recheck_latest(uow: UnitOfWork) -> list[ProviderCheck]:
    """Each provider's newest statement checked again (the job: a fix booked since the import,
    or a credit that came late, shows up without importing anything)."""
    return [check(uow, provider, sid, start, end)
            for sid, provider, start, end in repo.latest_statements(uow.conn)]
