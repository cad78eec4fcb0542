"""``custody reconcile <check>`` and ``custody cases list|show``: run a check now, every finding
a case (``api.cases.record_check``: opened, or re-sighted when open already, with an
``alert.case_opened`` per new case), and read the cases.

``custody reconcile custody`` (custody against the chain, ``reconcile.custody``) and
``custody reconcile provider FILE`` (a custody provider's statement imported and matched,
``reconcile.provider``; formats in ``docs/provider-statements.md``) record their findings the
same way, in the unit of work of the check.

``reconcile_cli`` is mounted by ``api/cli.py`` with no name (``reconcile`` appears at the top
level); ``list`` and ``show`` join the ``cases`` group of ``api.cli_treasury`` (whose
``resolve`` resolves any case, and whose ``approve`` is the second admin of an own-address one).
A check exits 1 when it found a discrepancy (its cases are open), 0 when it found none.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from api.cli_audit import audited
from api.cli_treasury import cases_app
from api.console import console, friendly, print_error
from api.render import Grid, print_grid

if TYPE_CHECKING:
    from config.errors import CustodyError
    from reconcile.custody import CustodyCheck
    from reconcile.model import Case, Finding, Recorded
    from reconcile.provider import Imported, ProviderCheck

reconcile_cli = typer.Typer()
reconcile_app = typer.Typer(help="Run a reconciliation check now; every finding is a case.",
                            no_args_is_help=True)
reconcile_cli.add_typer(reconcile_app, name="reconcile")

JsonOption = Annotated[bool, typer.Option("--json", help="JSON instead of a table.")]


def report_findings(check: str, findings: Sequence[Finding], as_json: bool) -> None:
    """Record the findings (``opened_by`` = ``check``), print them with their cases (a table,
    or JSON), and exit 1 if there were any: what every ``custody reconcile <check>`` ends
    with."""
    from api.cases import record_check
    from config.database import get_engine

    recorded = record_check(get_engine(), check, findings, datetime.now(UTC))
    if as_json:
        console.print_json(json.dumps(_document(check, findings, recorded), default=str))
    else:
        _table(check, findings, recorded)
    if findings:
        raise typer.Exit(1)


def _document(check: str, findings: Sequence[Finding], recorded: Recorded) -> dict[str, Any]:
    opened = set(recorded.opened)
    ids = recorded.case_ids
    return {"check": check, "opened": [str(i) for i in recorded.opened],
            "updated": [str(i) for i in recorded.updated],
            "findings": [{"case_id": str(i), "case": "opened" if i in opened else "updated",
                          "type": f.type, "subject": f.subject, "refs": dict(f.refs),
                          "expected": f.expected, "observed": f.observed,
                          "evidence": dict(f.evidence)} for f, i in zip(findings, ids,
                                                                         strict=True)]}


def _table(check: str, findings: Sequence[Finding], recorded: Recorded) -> None:
    if not findings:
        console.print(f"{check}: no discrepancy", highlight=False)
        return
    opened = set(recorded.opened)
    table = Grid(title=f"{check}: {len(findings)} discrepancies ({len(recorded.opened)} "
                        f"opened, {len(recorded.updated)} updated)")
    for column in ("case", "", "type", "subject", "expected", "observed"):
        table.add_column(column)
    for f, case_id in zip(findings, recorded.case_ids, strict=True):
        table.add_row(str(case_id), "opened" if case_id in opened else "updated", f.type,
                      f.subject, f.expected or "", f.observed or "")
    print_grid(console, table)


@reconcile_app.command("ledger")
@friendly
@audited("reconcile.ledger", details=("full",))
def reconcile_ledger(
    full: Annotated[bool, typer.Option(help="Replay from the first posting.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Stored balances against replayed postings, trial balance, custody against customer
    liabilities, unbalanced and empty transactions, over-consumed postings, checkpoints."""
    from config.database import get_engine
    from reconcile import ledger

    found = ledger.run(get_engine(), full=full, now=datetime.now(UTC))
    report_findings(ledger.CHECK, found, as_json)


@reconcile_app.command("histories")
@friendly
@audited("reconcile.histories")
def reconcile_histories(as_json: JsonOption = False) -> None:
    """Deposit histories against the ledger: every booked deposit has exactly one ledger
    transaction, every deposit ledger transaction its history row."""
    from config.database import get_engine
    from reconcile import histories

    found = histories.run(get_engine(), now=datetime.now(UTC))
    report_findings(histories.CHECK, found, as_json)


@reconcile_app.command("aging")
@friendly
@audited("reconcile.aging")
def reconcile_aging(
    as_json: JsonOption = False,
    config: Annotated[str | None, typer.Option(help="Configuration file with a reconcile section "
                                                    "(default: $CUSTODY_CONFIG).")] = None,
) -> None:
    """Open reserves past the SLA, withdrawals unknown or held, and deposits held for review,
    for longer than the thresholds of the configuration's reconcile section."""
    from config.database import get_engine
    from config.reconcile import load_reconcile_config
    from reconcile import aging

    cfg = load_reconcile_config(config)
    report_findings(aging.CHECK, aging.run(get_engine(), cfg, now=datetime.now(UTC)), as_json)


# --- cases -----------------------------------------------------------------------------------


def case_document(case: Case) -> dict[str, Any]:
    """A case as JSON (ids and amounts as strings)."""
    from reconcile import service

    return {"id": str(case.id), "type": case.type, "subject": case.subject, "refs": case.refs,
            "expected": case.expected, "observed": case.observed, "evidence": case.evidence,
            "status": case.status, "first_seen_at": case.first_seen_at.isoformat(),
            "last_seen_at": case.last_seen_at.isoformat(), "seen_count": case.seen_count,
            "opened_by": case.opened_by, "resolution": case.resolution,
            "resolved_by": case.resolved_by,
            "resolved_at": case.resolved_at.isoformat() if case.resolved_at else None,
            "resolution_transaction_id": None if case.resolution_transaction_id is None
            else str(case.resolution_transaction_id),
            "next": service.next_step(case) if case.open else None}


def _withdrawal_of(case: Case, own_withdrawals: dict[int, int]) -> str:
    """The withdrawal a case is about, or that a return or refund resolution names."""
    if "withdrawal_id" in case.refs:
        return case.refs["withdrawal_id"]
    found = own_withdrawals.get(int(case.refs.get("deposit_case_id", 0)))
    return "" if found is None else str(found)


@cases_app.command("list")
@friendly
def list_cases(
    type: Annotated[str | None, typer.Option("--type", help="Only cases of this type.")] = None,
    status: Annotated[str, typer.Option("--status", help="open, resolved or all.")] = "open",
    everything: Annotated[bool, typer.Option("--all", help="Same as --status all.")] = False,
    as_json: JsonOption = False,
    limit: Annotated[int, typer.Option(min=1, max=1000)] = 1000,
    cursor: Annotated[int | None, typer.Option(
        min=0, help="next_cursor of the previous page (--json prints it).")] = None,
) -> None:
    """Every case of the engine (reconciliation findings, deposit and withdrawal cases),
    oldest first: the open ones, or of --status; with the withdrawal a case is about or that
    an own-address return or refund resolution names."""
    from config.database import get_engine
    from config.uow import UnitOfWork
    from deposits import own
    from reconcile import service
    from reconcile.errors import ReconcileError

    if everything:
        status = "all"
    if status not in ("open", "resolved", "all"):
        raise ReconcileError(f"--status must be open, resolved or all, got {status!r}")
    with UnitOfWork(get_engine()) as uow:
        rows = service.list_cases(uow, type=type, status=None if status == "all" else status,
                                  limit=limit + 1, after_id=cursor or 0)
        found, more = rows[:limit], len(rows) > limit
        own_withdrawals = {c.id: c.withdrawal_id for c in own.list_cases(uow, resolved=True)
                           if c.withdrawal_id is not None}
    if as_json:
        # The API's CaseItems page (GET /v1/admin/cases).
        console.print_json(json.dumps({"items": [case_document(c) for c in found],
                                       "has_more": more,
                                       "next_cursor": str(found[-1].id) if more else None}))
        return
    table = Grid(title=f"cases ({status})")
    for column in ("id", "type", "subject", "status", "seen", "last seen", "expected",
                   "observed", "resolved by", "resolution", "fix tx", "withdrawal"):
        table.add_column(column)
    for c in found:
        table.add_row(str(c.id), c.type, c.subject, c.status, str(c.seen_count),
                      c.last_seen_at.isoformat(timespec="seconds"), c.expected or "",
                      c.observed or "", c.resolved_by or "", (c.resolution or "")[:60],
                      str(c.resolution_transaction_id or ""), _withdrawal_of(c, own_withdrawals))
    print_grid(console, table)
    if more:
        console.print(f"more: --cursor {found[-1].id}", highlight=False, soft_wrap=True)


@cases_app.command("show")
@friendly
def show_case(
    case_id: Annotated[int, typer.Argument(help="Case id.")],
    as_json: JsonOption = False,
) -> None:
    """One case: what it is about, expected and observed, evidence, sightings, resolution,
    and what to do next."""
    from config.database import get_engine
    from config.uow import UnitOfWork
    from reconcile import service

    with UnitOfWork(get_engine()) as uow:
        document = case_document(service.get_case(uow, case_id))
    if as_json:
        console.print_json(json.dumps(document))
        return
    for key, value in document.items():
        if value is None:
            continue
        shown = json.dumps(value) if isinstance(value, dict) else str(value)
        console.print(f"{key:>26}: {shown}", highlight=False, markup=False, soft_wrap=True)


def resolve_case(case_id: int, by: str, resolution: str, transaction: int | None) -> None:
    """``custody cases resolve ID --by NAME --resolution TEXT [--transaction TXID]``."""
    from config.database import get_engine
    from config.uow import run_in_transaction
    from reconcile import service

    case = run_in_transaction(get_engine(), lambda uow: service.resolve_case(
        uow, case_id, by, resolution, transaction, now=datetime.now(UTC)))
    fix = (f", fixed by ledger transaction {case.resolution_transaction_id}"
           if case.resolution_transaction_id else "")
    console.print(f"case {case.id} resolved by {case.resolved_by}{fix}", highlight=False)


# --- custody against the chain; custody provider statements ----------------------------------


def _one_line(exc: CustodyError) -> NoReturn:
    """An expected error as one line however long (``print_error``), exit 2."""
    print_error(exc.code, exc.message)
    raise typer.Exit(2) from None


def _case_of(recorded: Recorded, findings: Sequence[Finding]) -> dict[str, tuple[int, str]]:
    """subject -> (case id, opened|updated) of recorded findings."""
    opened = set(recorded.opened)
    return {f.subject: (i, "opened" if i in opened else "updated")
            for f, i in zip(findings, recorded.case_ids, strict=True)}


@reconcile_app.command("custody")
@friendly
@audited("reconcile.custody", ("chain",))
def reconcile_custody(
    chain: Annotated[str | None, typer.Option(help="One chain (default: every configured "
                                                   "chain).")] = None,
    config: Annotated[str | None, typer.Option(help="Chain configuration file (default: "
                                                    "$CUSTODY_CONFIG).")] = None,
    as_json: JsonOption = False,
) -> None:
    """Custody against the chain: per chain, holder (each deposit address; the hot and cold
    addresses together) and asset, what the chain holds at the newest final block against
    custody + treasury, allowing only for the movements in flight the engine names (amounts in
    on-chain units). Every discrepancy is a case; exit 1 when there is one."""
    from api.jobs import custody_check
    from config.chains import load_chains_config
    from config.database import get_engine
    from sweeps.holdings import HoldingsUnavailable

    chains = load_chains_config(config)
    names = [chains.chain(chain).name] if chain is not None else sorted(chains.chains)
    engine, now = get_engine(), datetime.now(UTC)
    try:
        results = [custody_check(engine, chains, name, now) for name in names]
    except HoldingsUnavailable as exc:
        _one_line(exc)
    documents = []
    for check, recorded in results:
        findings = check.findings
        cases = _case_of(recorded, findings)
        documents.append({
            "chain": check.chain, "finality": check.finality,
            "block_number": check.block_number, "block_hash": check.block_hash,
            "watcher_block": check.watcher_block, "incoming_known": check.incoming_known,
            "positions": len(check.verdicts),
            "opened": [str(i) for i in recorded.opened],
            "updated": [str(i) for i in recorded.updated],
            "findings": [{"case_id": str(cases[f.subject][0]), "case": cases[f.subject][1],
                          "type": f.type, "subject": f.subject, "refs": dict(f.refs),
                          "expected": f.expected, "observed": f.observed,
                          "evidence": dict(f.evidence)} for f in findings]})
        if not as_json:
            _custody_table(check, cases)
    if as_json:
        console.print_json(json.dumps({"check": "custody", "chains": documents}))
    if any(d["findings"] for d in documents):
        raise typer.Exit(1)


def _custody_table(check: CustodyCheck, cases: dict[str, tuple[int, str]]) -> None:
    watcher = ("" if check.incoming_known else
               f"; the watcher is at {check.watcher_block}: an excess is not judged")
    head = (f"{check.chain}: block {check.block_number} ({check.finality}), "
            f"{len(check.verdicts)} holder/asset positions{watcher}")
    bad = [v for v in check.verdicts if not v.explained]
    if not bad:
        console.print(f"{head}: no discrepancy", highlight=False, soft_wrap=True)
        return
    table = Grid(title=f"{head}: {len(bad)} discrepancies")
    for column in ("case", "", "holder", "asset", "expected", "observed", "difference",
                   "allowed", "in flight"):
        table.add_column(column)
    for v in bad:
        p = v.position
        case_id, how = cases[p.subject]
        high = "..." if v.high is None else str(v.high)
        table.add_row(str(case_id), how, p.holder, p.asset, str(p.expected), str(p.on_chain),
                      str(p.difference), f"{v.low}..{high}", str(len(v.movements)))
    print_grid(console, table)


@reconcile_app.command("provider")
@friendly
@audited("reconcile.provider", details=("file", "fmt", "by"))
def reconcile_provider(
    file: Annotated[Path, typer.Argument(help="The statement: CSV or JSON "
                                              "(docs/provider-statements.md).")],
    fmt: Annotated[str | None, typer.Option("--format", help="csv or json (default: from the "
                                                             "file's suffix).")] = None,
    by: Annotated[str, typer.Option("--by", help="Who imports it (recorded).")] = "cli",
    as_json: JsonOption = False,
) -> None:
    """Import a custody provider's statement and match its period with our ledger, by
    reference: matched, different amount, missing in the ledger, ours missing at the
    provider; every discrepancy is a case, and the clearing account's unexplained remainder
    is shown per asset (minor units). The same file again stores nothing; a malformed file is
    refused in one line and changes nothing. Exit 1 when there is a discrepancy."""
    from api.cases import record_and_alert
    from config.database import get_engine
    from config.uow import UnitOfWork
    from reconcile import provider

    if fmt not in (None, "csv", "json"):
        _one_line(provider.ProviderStatementInvalid(f"--format must be csv or json, not {fmt!r}"))
    try:
        loaded = provider.load_statement(file, "csv" if fmt == "csv" else
                                         "json" if fmt == "json" else None)
        now = datetime.now(UTC)
        with UnitOfWork(get_engine()) as uow:
            imported, check = provider.run(uow, loaded, imported_by=by, now=now)
            findings = check.findings
            recorded = record_and_alert(uow, provider.CHECK, findings, now)
            uow.commit()
    except (provider.ProviderStatementInvalid, provider.ProviderStatementConflict) as exc:
        _one_line(exc)
    cases = _case_of(recorded, findings)
    if as_json:
        console.print_json(json.dumps(_provider_document(imported, check, findings, cases)))
    else:
        _provider_tables(imported, check, findings, cases)
    if findings:
        raise typer.Exit(1)


def _provider_document(imported: Imported, check: ProviderCheck, findings: Sequence[Finding],
                       cases: dict[str, tuple[int, str]]) -> dict[str, Any]:
    from reconcile.provider_model import Outcome

    rec = check.reconciliation
    return {
        "check": "provider", "provider": check.provider,
        "statement_id": str(imported.statement_id), "new": imported.new,
        "records_added": imported.records_added, "records_known": imported.records_known,
        "period_start": check.period_start.isoformat(),
        "period_end": check.period_end.isoformat(),
        "outcomes": {o.value: rec.count(o) for o in Outcome},
        "matches": [{"reference": m.reference, "outcome": m.outcome.value,
                     "fields": list(m.fields),
                     "provider": None if m.theirs is None else m.theirs.to_json(),
                     "ledger": None if m.ours is None else {
                         "asset": m.ours.asset, "net_minor": str(m.ours.net_minor),
                         "transaction_ids": [str(i) for i in m.ours.transaction_ids]}}
                    for m in rec.matches],
        "remainders": [{"asset": r.asset, "clearing_minor": str(r.clearing_minor),
                        "unbooked_minor": str(r.unbooked_minor),
                        "remainder_minor": str(r.remainder_minor)} for r in rec.remainders],
        "findings": [{"case_id": str(cases[f.subject][0]), "case": cases[f.subject][1],
                      "type": f.type, "subject": f.subject, "refs": dict(f.refs),
                      "expected": f.expected, "observed": f.observed} for f in findings]}


def _provider_tables(imported: Imported, check: ProviderCheck, findings: Sequence[Finding],
                     cases: dict[str, tuple[int, str]]) -> None:
    from reconcile.provider_model import Outcome

    rec = check.reconciliation
    seen = "imported" if imported.new else "already imported: nothing stored"
    console.print(
        f"{check.provider}: statement {imported.statement_id} ({seen}), "
        f"{imported.records_added} new and {imported.records_known} known records, period "
        f"{check.period_start.isoformat()} to {check.period_end.isoformat()}; "
        + ", ".join(f"{rec.count(o)} {o.value}" for o in Outcome),
        highlight=False, soft_wrap=True)
    case_of = {(f.refs["reference"], f.evidence["outcome"]): cases[f.subject]
               for f in findings}
    table = Grid(title=f"{check.provider}: {len(findings)} discrepancies")
    for column in ("reference", "outcome", "provider", "ledger", "case"):
        table.add_column(column)
    for m in rec.matches:
        theirs = "" if m.theirs is None else (f"{m.theirs.direction} {m.theirs.amount_minor} "
                                              f"{m.theirs.asset}")
        ours = "" if m.ours is None else f"{m.ours.net_minor:+d} {m.ours.asset}"
        found = case_of.get((m.reference, m.outcome.value))
        case = "" if found is None else f"{found[0]} {found[1]}"
        outcome = m.outcome.value + (f" ({', '.join(m.fields)})" if m.fields else "")
        table.add_row(m.reference, outcome, theirs, ours, case)
    print_grid(console, table)
    rest = Grid(title="clearing remainder per asset (minor units)")
    for column in ("asset", "clearing", "unbooked", "remainder"):
        rest.add_column(column, justify="right")
    for r in rec.remainders:
        rest.add_row(r.asset, str(r.clearing_minor), str(r.unbooked_minor),
                     str(r.remainder_minor))
    print_grid(console, rest)
