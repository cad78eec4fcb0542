"""``custody seal``: append seals now, export the newest seal for anchoring, verify the chain
(``ledger.seals``; the format is docs/sealing.md).

Mounted by ``api/cli.py`` as ``app.add_typer(seal_app, name="seal")``. ``custody verify`` checks
the seals too (with every other ledger invariant); ``seal verify`` checks only the chain and
says how many seals it recomputed and from where.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated

import typer

from api.cli_audit import audited
from api.cli_reads import JsonOption
from api.console import console, friendly, print_error

if TYPE_CHECKING:
    from ledger.repository.seals import SealRecord

seal_app = typer.Typer(help="Ledger seals: tamper evidence (docs/sealing.md).",
                       no_args_is_help=True)


def seal_json(seal: SealRecord) -> dict[str, str]:
    """A seal as JSON (ids and counts as strings, as every number the API returns)."""
    return {
        "seal_id": str(seal.id),
        "seal_hash": seal.seal_hash,
        "previous_hash": seal.previous_hash,
        "merkle_root": seal.merkle_root,
        "from_transaction_id": str(seal.from_transaction_id),
        "through_transaction_id": str(seal.through_transaction_id),
        "transactions_count": str(seal.transactions_count),
        "postings_count": str(seal.postings_count),
        "sealed_at": seal.sealed_at.astimezone(UTC).isoformat(),
    }


@seal_app.command("export")
@friendly
def export(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Print the newest seal (hash, transaction range, time) to anchor it elsewhere.
    Exit 2 when nothing has been sealed yet."""
    from config.database import get_engine
    from ledger.seals import newest_seal

    seal = newest_seal(get_engine())
    if seal is None:
        print_error("seal_not_found", "no seal yet (run `custody seal run`)")
        raise typer.Exit(2)
    if as_json:
        print(json.dumps(seal_json(seal), indent=2))
        return
    for key, value in seal_json(seal).items():
        console.print(f"{key:<23} {value}", highlight=False, markup=False)


@seal_app.command("run")
@friendly
@audited("seal.run")
def run(
    max_transactions: Annotated[
        int, typer.Option(min=1, max=1_000_000, help="Transactions per seal at most.")
    ] = 10_000,
    seals_max: Annotated[int, typer.Option(min=1, help="Seals to append at most.")] = 1_000,
) -> None:
    """Seal the transactions committed since the newest seal (what the ledger.seal job does)."""
    from config.database import get_engine
    from ledger.seals import seal_once

    made = seal_once(get_engine(), datetime.now(UTC), max_transactions=max_transactions,
                     seals_max=seals_max)
    if not made:
        console.print("nothing new to seal")
        return
    console.print(
        f"{len(made)} seals: transactions {made[0].from_transaction_id}.."
        f"{made[-1].through_transaction_id}, newest {made[-1].seal_hash}", highlight=False)


@seal_app.command("verify")
@friendly
def verify(
    full: Annotated[bool, typer.Option(help="From the first seal, not the checkpoint's.")] = False,
    in_python: Annotated[bool, typer.Option(
        "--in-python", help="Build the canonical form in Python from the plain columns (slower; "
                            "independent of any SQL the database runs).")] = False,
    as_json: JsonOption = False,
) -> None:
    """Recompute the seal chain; exit 1 and name what changed if anything did (--json:
    ``ok``, ``seals_checked``, ``anchor_seal_id``, ``discrepancies``)."""
    from config.database import get_engine
    from ledger import repository as repo
    from ledger.seals import verify_seals

    with repo.snapshot(get_engine(), read_only=True) as conn:
        base = None if full else repo.newest_verified_checkpoint(conn)
        report = verify_seals(conn, base, leaves="python" if in_python else "sql")
    if as_json:
        from api.cli_reads import discrepancies_json, print_report

        print_report({"ok": not report.discrepancies, "seals_checked": report.seals_checked,
                      "anchor_seal_id": None if report.anchor_seal_id is None
                      else str(report.anchor_seal_id),
                      "discrepancies": discrepancies_json(report.discrepancies)})
        if report.discrepancies:
            raise typer.Exit(1)
        return
    start = "the first seal" if report.anchor_seal_id is None \
        else f"seal {report.anchor_seal_id} (checkpoint)"
    if not report.discrepancies:
        console.print(f"ok: {report.seals_checked} seals recomputed after {start}")
        return
    from api.render import discrepancies_table, print_grid

    table = discrepancies_table(f"seal findings ({report.seals_checked} seals after {start})",
                                report.discrepancies)
    print_grid(console, table)
    raise typer.Exit(1)
