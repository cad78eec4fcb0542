"""``custody reserves ...``: take a proof-of-reserves report, read the stored ones, give a
user's inclusion proof, and check proofs and ownership signatures offline.

``report`` takes one now (``reserves.service.take_report``) and records its findings as cases
with their alerts (``api.cases.record_check``): holdings below liabilities, a difference between
chain and ledger that no movement explains, a negative balance that keeps the report from being
published. It exits 1 when there was a finding, as the reconciliation checks do.

``verify`` and ``verify-ownership`` need no database and no network: they read files.
``docs/verify_proof.py`` is the same proof check with Python's standard library alone.
"""

from __future__ import annotations

import json
import re
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from api.cli_audit import audited
from api.cli_reads import JsonOption
from api.console import console, err_console, friendly, print_error
from api.render import Grid, print_grid

reserves_app = typer.Typer(help="Proof of reserves: reports, inclusion proofs, offline checks.",
                           no_args_is_help=True)

HEX_ROOT = re.compile(r"[0-9a-f]{64}")
HtmlOption = Annotated[Path | None, typer.Option(
    "--html", help="Also write the report as one self-contained HTML file (opens offline).")]
ConfigOption = Annotated[str | None, typer.Option(
    help="Chain configuration file (default: $CUSTODY_CONFIG).")]


def _fail(code: str, message: str, exit_code: int = 2) -> typer.Exit:
    print_error(code, message)
    return typer.Exit(exit_code)


def _at_blocks(values: list[str] | None) -> dict[str, int]:
    found: dict[str, int] = {}
    for value in values or []:
        chain, sep, number = value.partition("=")
        if not sep or not chain or not number.isdigit():
            raise _fail("request_invalid", f"--at-block {value!r}: expected CHAIN=NUMBER")
        found[chain] = int(number)
    return found


def _decimal(minor: str, scale: int) -> str:
    from ledger.model import format_amount

    return format_amount(int(minor), scale)


def _write_out(doc: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    sys.stdout.flush()


def _print_report(doc: dict[str, Any]) -> None:
    liabilities = doc["liabilities"]
    console.print(f"report {doc['id']} taken {doc['taken_at']}, ledger through posting "
                  f"{doc['ledger']['through_posting_id']} (known at "
                  f"{doc['ledger']['known_at']})", highlight=False, soft_wrap=True)
    for c in doc["chains"]:
        console.print(f"  {c['chain']}: block {c['block_number']} {c['block_hash']} "
                      f"({c['finality']})", highlight=False, soft_wrap=True)
    console.print(f"liabilities root {liabilities['root']} over {liabilities['users']} users "
                  f"(depth {liabilities['depth']})", highlight=False, soft_wrap=True)
    table = Grid(title="reserves against liabilities, per asset")
    for column in ("asset", "liabilities", "custody", "treasury", "on chain", "difference",
                   "ratio", "marks"):
        table.add_column(column, justify="left" if column in ("asset", "marks") else "right")
    for a in doc["assets"]:
        s = int(a["scale"])
        marks = [m for m, on in (("below 1", int(a["on_chain"]) < int(a["liabilities"])),
                                 ("unexplained", not a["explained"])) if on]
        table.add_row(a["asset"], _decimal(a["liabilities"], s), _decimal(a["custody"], s),
                      _decimal(a["treasury"], s), _decimal(a["on_chain"], s),
                      _decimal(a["difference"], s), a["ratio"] or "-", ", ".join(marks))
    print_grid(console, table)
    if doc.get("addresses") is not None:
        signed = sum(1 for a in doc["addresses"] if a["signature"])
        console.print(f"{len(doc['addresses'])} addresses listed, {signed} signed",
                      highlight=False)


def _html(path: Path, doc: dict[str, Any]) -> None:
    from config.database import get_engine
    from config.uow import UnitOfWork
    from reserves import service
    from reserves.html import render_report

    with UnitOfWork(get_engine()) as uow:
        past = service.history(uow, limit=500, before_id=int(doc["id"]) + 1)
    path.write_text(render_report(doc, list(reversed(past))), encoding="utf-8")
    err_console.print(f"wrote {path}", highlight=False)


@reserves_app.command("report")
@friendly
@audited("reserves.report", details=("at_block", "by"))
def report(
    at_block: Annotated[list[str] | None, typer.Option(
        "--at-block", help="CHAIN=NUMBER: read that chain at this final block (default: the "
                           "newest block final under its rule; the ledger is read now, so "
                           "what moved since an older block shows as a difference). "
                           "Repeatable.")] = None,
    by: Annotated[str, typer.Option(help="Who takes the report.")] = "cli",
    as_json: JsonOption = False,
    html: HtmlOption = None,
    config: ConfigOption = None,
) -> None:
    """Take a report now: the ledger at one watermark, every chain at one final block, the
    liabilities tree, every address holding funds signed. Prints per asset liabilities,
    custody, treasury, on-chain holdings, the difference and the ratio. Exit 1 when a case
    was opened or re-sighted (holdings below liabilities, an unexplained difference, a negative
    balance: then nothing is published)."""
    from api.cases import record_check
    from config.chains import load_chains_config
    from config.database import get_engine
    from config.uow import UnitOfWork
    from config.withdrawals import load_withdrawals_config
    from reserves import service
    from reserves.signers import EngineSigners

    chains = load_chains_config(config)
    blocks = _at_blocks(at_block)
    engine = get_engine()
    now = datetime.now(UTC)
    taken = service.take_report(engine, chains, now=now, taken_by=by, at_blocks=blocks,
                                signer_of=EngineSigners(chains, load_withdrawals_config(
                                    chains, config)))
    record_check(engine, "reserves.report", taken.findings, now)
    if taken.report_id is None:
        for f in taken.findings:
            err_console.print(f"refused: {f.subject} is {f.observed} ({f.type})",
                              highlight=False, soft_wrap=True)
        raise _fail("report_refused", "no report was published: a user's balance is "
                                      "negative (see the cases above)", 1)
    with UnitOfWork(engine) as uow:
        doc = service.report_document(uow, taken.report_id)
    if as_json:
        _write_out(doc)
    else:
        _print_report(doc)
    if html is not None:
        _html(html, doc)
    if taken.findings:
        raise typer.Exit(1)


@reserves_app.command("show")
@friendly
def show(
    report_id: Annotated[int | None, typer.Argument(help="Report id (default: the newest).")]
    = None,
    as_json: JsonOption = False,
    html: HtmlOption = None,
) -> None:
    """A stored report: its figures per asset, the root, the chains' blocks, the addresses."""
    from config.database import get_engine
    from config.uow import UnitOfWork
    from reserves import service

    with UnitOfWork(get_engine()) as uow:
        doc = service.report_document(uow, report_id)
    if as_json:
        _write_out(doc)
    else:
        _print_report(doc)
    if html is not None:
        _html(html, doc)


@reserves_app.command("list")
@friendly
def list_reports(
    limit: Annotated[int, typer.Option(min=1, max=1000, help="How many, newest first.")] = 20,
    as_json: JsonOption = False,
) -> None:
    """The stored reports, newest first: per asset the liabilities, the holdings and the
    ratio."""
    from config.database import get_engine
    from config.uow import UnitOfWork
    from reserves import service

    with UnitOfWork(get_engine()) as uow:
        items = service.history(uow, limit=limit)
    if as_json:
        _write_out({"items": items})
        return
    table = Grid(title="proof-of-reserves reports")
    for column in ("id", "taken at", "asset", "liabilities", "on chain", "ratio", "users",
                   "root"):
        table.add_column(column)
    for item in items:
        for a in item["assets"]:
            s = int(a["scale"])
            table.add_row(str(item["id"]), item["taken_at"], a["asset"],
                          _decimal(a["liabilities"], s), _decimal(a["on_chain"], s),
                          a["ratio"] or "-", str(item["users"]), item["root"])
    print_grid(console, table)


@reserves_app.command("proof")
@friendly
def proof(
    user_id: Annotated[str, typer.Argument(help="The user.")],
    report_id: Annotated[int | None, typer.Option(
        "--report", help="Report id (default: the newest).")] = None,
) -> None:
    """The user's inclusion proof as JSON (the leaf's salt and balances, the path, the root):
    give it to the user, who checks it with ``custody reserves verify`` or
    ``docs/verify_proof.py`` against the published root."""
    from config.database import get_engine
    from config.uow import UnitOfWork
    from reserves import service

    with UnitOfWork(get_engine()) as uow:
        _write_out(service.user_proof(uow, user_id, report_id))


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise _fail("file_unreadable", f"{path}: {exc}") from None
    except (json.JSONDecodeError, RecursionError) as exc:
        raise _fail("file_unreadable", f"{path} is not JSON: {exc}") from None


@reserves_app.command("verify")
def verify(
    proof_file: Annotated[Path, typer.Argument(help="The proof (JSON).", metavar="PROOF.json")],
    root: Annotated[str, typer.Argument(help="The published root hash (64 hex digits).")],
    as_json: JsonOption = False,
) -> None:
    """Check an inclusion proof against a published root, offline (no database, no network).
    Exit 0 and the leaf's balances when it holds; exit 1 and one line ``invalid [reason]``
    when it does not (a file that is not JSON included); exit 2 when the file cannot be
    read or ROOT is not 64 hex digits. --json: {valid, reason} or {valid, user_id, root,
    balances, totals} (minor units as strings) on stdout, with the same exit statuses."""
    from api.cli_reads import print_report
    from reserves.merkle import ProofInvalid
    from reserves.merkle import verify as verify_proof

    if not HEX_ROOT.fullmatch(root.strip().lower()):
        # As docs/verify_proof.py: a root that is not one is a usage error.
        raise _fail("request_invalid", "ROOT must be the published liabilities root: 64 hex "
                                       "digits")
    try:
        doc = json.loads(proof_file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise _fail("file_unreadable", f"{proof_file}: {exc}") from None
    except (json.JSONDecodeError, RecursionError) as exc:
        # As docs/verify_proof.py: a file that is not JSON is not a proof.
        err_console.print(f"invalid [malformed]: {proof_file} is not JSON: {exc}",
                          highlight=False, markup=False, soft_wrap=True)
        if as_json:
            print_report({"valid": False, "reason": "malformed"})
        raise typer.Exit(1) from None
    try:
        verified = verify_proof(doc, root)
    except ProofInvalid as exc:
        err_console.print(f"invalid [{exc.reason}]: {exc}", highlight=False, markup=False,
                          soft_wrap=True)
        if as_json:
            print_report({"valid": False, "reason": exc.reason})
        raise typer.Exit(1) from None
    if as_json:
        print_report({"valid": True, "user_id": verified.user_id, "root": verified.root_hash,
                      "balances": {a: str(v) for a, v in verified.balances.items()},
                      "totals": {a: str(v) for a, v in verified.totals.items()}})
        return
    scales = doc.get("scales") if isinstance(doc.get("scales"), dict) else {}
    console.print(f"valid: user {verified.user_id} is included under root "
                  f"{verified.root_hash}", highlight=False, soft_wrap=True)
    for asset, value in verified.balances.items():
        scale = scales.get(asset)
        shown = _decimal(str(value), scale) if isinstance(scale, int) else f"{value} (minor)"
        total = verified.totals[asset]
        all_shown = _decimal(str(total), scale) if isinstance(scale, int) else f"{total}"
        console.print(f"  {asset}: {shown} of {all_shown} in total", highlight=False,
                      soft_wrap=True)


@reserves_app.command("verify-ownership")
def verify_ownership(
    report_file: Annotated[Path, typer.Argument(help="The report (JSON, as published).",
                                                metavar="REPORT.json")],
    as_json: JsonOption = False,
) -> None:
    """Recover the signer of every address's signature in a report, offline. Exit 0 when every
    address that holds funds is signed by itself over the report's message and no signature
    is wrong; 1 otherwise (each address's verdict in the table; --json: a list of {chain,
    address, kind, signer, verdict, detail, recovered, holds_funds})."""
    from reserves.ownership import OwnershipError, check_report

    doc = _read_json(report_file)
    try:
        checks = check_report(doc)
    except OwnershipError as exc:
        raise _fail(exc.code, exc.message) from None
    if as_json:
        from api.cli_reads import print_report

        print_report([{"chain": c.chain, "address": c.address, "kind": c.kind,
                       "signer": str(c.signer), "verdict": str(c.verdict), "detail": c.detail,
                       "recovered": c.recovered, "holds_funds": c.holds_funds} for c in checks])
    else:
        table = Grid(title=f"ownership of the addresses of report {doc.get('id')}")
        for column in ("chain", "address", "kind", "signer", "verdict", "detail"):
            table.add_column(column)
        for c in checks:
            table.add_row(c.chain, c.address, c.kind, c.signer, c.verdict, c.detail or "")
        print_grid(console, table)
    if any(c.verdict not in ("ok", "unsigned") or (c.verdict == "unsigned" and c.holds_funds)
           for c in checks):
        raise typer.Exit(1)


@reserves_app.command("import-signatures")
@friendly
@audited("reserves.signatures_import", ("report_id",), details=("signatures_file", "by"))
def import_signatures(
    report_id: Annotated[int, typer.Argument(help="The report the signatures are for.")],
    signatures_file: Annotated[Path, typer.Argument(
        help="JSON list of {chain, address, signature}: EIP-191 signatures of each address's "
             "ownership message (``custody reserves show ID --json`` lists the messages).",
        metavar="SIGNATURES.json")],
    by: Annotated[str, typer.Option(help="Who imports them.")],
) -> None:
    """Record the signatures of addresses whose keys the engine does not hold (cold
    addresses, xpub deposit addresses). Each must recover to its address over that address's
    message in this report; one that does not is refused and nothing is recorded."""
    from config.database import get_engine
    from config.uow import UnitOfWork
    from reserves import service

    raw = _read_json(signatures_file)
    with UnitOfWork(get_engine()) as uow:
        added = service.import_signatures(uow, report_id, raw, recorded_by=by,
                                          now=datetime.now(UTC))
        uow.commit()
    console.print(f"{added} signature(s) recorded for report {report_id}", highlight=False)
