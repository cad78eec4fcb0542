"""``custody treasury`` and ``custody cases``: declared fundings, the treasury report, the
resolution of any case, and the two-admin resolution of unattributed transfers to our own
addresses (``custody cases list`` and ``show`` are in ``api.cli_reconcile``).

Mounted by ``api/cli.py`` with ``app.add_typer(treasury_cli)`` (no name: ``treasury`` and
``cases`` appear at the top level). The chain configuration comes from ``$CUSTODY_CONFIG`` (or
``--config``). Expected errors print one line (``error [code]: ...``) and exit with 2; nothing
is written then.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer

from api.cli_audit import audited
from api.console import console, friendly, print_error
from api.render import Grid, print_grid

if TYPE_CHECKING:
    from config.chains import ChainsConfig
    from deposits.own import CaseOutcome
    from deposits.treasury import AssetHoldings

treasury_cli = typer.Typer(help="Treasury and own-address cases.")
treasury_app = typer.Typer(help="Treasury: declared fundings and the treasury report.",
                           no_args_is_help=True)
cases_app = typer.Typer(help="Cases: every discrepancy and deposit or withdrawal case of the "
                             "engine.", no_args_is_help=True)
treasury_cli.add_typer(treasury_app, name="treasury")
treasury_cli.add_typer(cases_app, name="cases")

ConfigOption = Annotated[str | None, typer.Option(help="Chain configuration file (default: "
                                                       "$CUSTODY_CONFIG).")]


def _chains(path: str | None) -> ChainsConfig:
    from config.chains import load_chains_config

    return load_chains_config(path)


@treasury_app.command("expect")
@friendly
@audited("treasury.funding", ("chain", "asset"),
         details=("amount", "from_address", "reason", "key", "by"))
def expect(
    chain: Annotated[str, typer.Option(help="Chain the funding arrives on.")],
    asset: Annotated[str, typer.Option(help="Ledger asset code (ETH, USDC...).")],
    amount: Annotated[str, typer.Option(help=(
        "Exact amount in minor units of the asset, digits only (2500000000000000000 for "
        "2.5 ETH of scale 18); the confirmation shows it as a decimal."))],
    from_address: Annotated[str, typer.Option("--from", help="Sender address (0x...).")],
    reason: Annotated[str, typer.Option(help="Why the company funds the treasury.")],
    key: Annotated[str | None, typer.Option(help="Idempotency key (default: a new one, "
                                                 "printed); the same key again returns the "
                                                 "first declaration.")] = None,
    by: Annotated[str, typer.Option(help="Who declares it.")] = "cli",
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    config: ConfigOption = None,
) -> None:
    """Declare company capital expected on chain: the final transfer of exactly AMOUNT from
    the sender to a hot or cold address is booked DR treasury / CR equity:owner."""
    from config.database import get_engine
    from config.uow import run_in_transaction
    from deposits import own

    chains = _chains(config)
    req = own.FundingRequest(chain, asset, amount, from_address, reason)
    own.validate_funding(chains, req)  # Bad input: one line, before touching the database.
    idem = key or uuid.uuid4().hex
    found, replayed = run_in_transaction(get_engine(), lambda uow: own.declare_funding(
        uow, chains, req, declared_by=by, idempotency_key=f"cli:{idem}"))
    if as_json:
        typer.echo(json.dumps({**_funding_json(chains, found), "key": idem,
                                       "replayed": replayed}))
        return
    note = " (replayed: declared before under this key)" if replayed else ""
    from ledger.model import amount_json

    shown = amount_json(found.amount_minor, chains.assets[found.asset_code].scale)["decimal"]
    console.print(f"funding {found.id}: expecting {shown} {asset} ({found.amount_minor} minor "
                  f"units) on {chain} from {found.from_address} (key {idem}){note}",
                  highlight=False)


def _funding_json(chains: ChainsConfig, f: Any) -> dict[str, Any]:
    from ledger.model import amount_json

    return {"id": f.id, "chain": f.chain, "asset": f.asset_code,
            "amount": amount_json(f.amount_minor, chains.assets[f.asset_code].scale),
            "from_address": f.from_address, "reason": f.reason, "declared_by": f.declared_by,
            "declared_at": f.declared_at.isoformat(),
            "state": "matched" if f.deposit_id is not None else "expected",
            "deposit_id": f.deposit_id, "ledger_transaction_id": f.ledger_transaction_id}


@treasury_app.command("fundings")
@friendly
def fundings(
    chain: Annotated[str | None, typer.Option(help="Only this chain.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    config: ConfigOption = None,
) -> None:
    """Declared fundings, newest first, matched or still expected."""
    from config.database import get_engine
    from config.uow import UnitOfWork
    from deposits import own

    chains = _chains(config)
    with UnitOfWork(get_engine()) as uow:
        rows = [_funding_json(chains, f) for f in own.list_fundings(uow, chain=chain)]
    if as_json:
        typer.echo(json.dumps({"items": rows}))
        return
    table = Grid(title="treasury fundings")
    for column in ("id", "chain", "asset", "amount", "from", "state", "deposit", "reason"):
        table.add_column(column)
    for r in rows:
        table.add_row(str(r["id"]), r["chain"], r["asset"], r["amount"]["decimal"],
                      r["from_address"], r["state"], str(r["deposit_id"] or ""), r["reason"])
    print_grid(console, table)


_FIELDS = ("treasury", "gas_float", "hot_onchain", "hot_custody", "hot_treasury", "onchain",
           "custody", "custody_plus_treasury", "difference")


def _holdings_json(h: AssetHoldings) -> dict[str, Any]:
    from ledger.model import amount_json

    values = {"treasury": h.treasury_minor, "gas_float": h.gas_float_minor,
              "hot_onchain": h.hot_onchain_minor, "hot_custody": h.hot_custody_minor,
              "hot_treasury": h.hot_treasury_minor, "onchain": h.onchain_minor,
              "custody": h.custody_minor, "custody_plus_treasury": h.ledger_minor,
              "difference": h.difference_minor}
    return {"chain": h.chain, "asset": h.asset, "native": h.native,
            "block_number": h.block_number, "addresses": h.addresses, "exact": h.exact,
            "unavailable": h.unavailable,
            **{k: None if v is None else amount_json(v, h.scale) for k, v in values.items()}}


@treasury_app.command("show")
@friendly
def show(
    chain: Annotated[str | None, typer.Option(help="Only this chain.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON (amounts as strings).")]
    = False,
    config: ConfigOption = None,
) -> None:
    """Per chain and asset: the treasury in the ledger (the gas float for the native asset),
    the hot wallets on chain at the finalized block split into customer money (custody) and
    company money (treasury), and all our addresses on chain next to custody + treasury."""
    from config.database import get_engine
    from deposits.treasury import treasury_report

    chains = _chains(config)
    names = [chains.chain(chain).name] if chain else None
    rows = [_holdings_json(h) for h in treasury_report(get_engine(), chains, names)]
    # A chain whose node could not be read: its ledger figures are shown, then one line per
    # such chain and exit 2 (the report is incomplete).
    missing = dict.fromkeys(f"chain {r['chain']}: on-chain figures not read: {r['unavailable']}"
                            for r in rows if r["unavailable"])
    if as_json:
        typer.echo(json.dumps({"items": rows}))
        _incomplete(list(missing))
        return
    table = Grid(title="treasury (on chain at the finalized block)")
    for column in ("chain", "asset", "block", *_FIELDS):
        table.add_column(column.replace("_", " "), justify="left" if column in (
            "chain", "asset") else "right")
    for r in rows:
        table.add_row(r["chain"], r["asset"], str(r["block_number"] or "-"),
                      *("-" if r[f] is None else r[f]["decimal"] for f in _FIELDS))
    print_grid(console, table)
    _incomplete(list(missing))


def _incomplete(lines: list[str]) -> None:
    if lines:
        for line in lines:
            print_error("node_unavailable", line)
        raise typer.Exit(2)


def _decision(d: CaseOutcome) -> None:
    extra = f" withdrawal {d.withdrawal_id}" if d.withdrawal_id else ""
    if d.state == "resolved":
        console.print(f"case {d.case_id} resolved as {d.outcome}{extra}: proposed by "
                      f"{d.proposed_by}, approved by {d.approved_by}"
                      + (f", ledger transaction {d.ledger_transaction_id}"
                         if d.ledger_transaction_id else ""), highlight=False)
    else:
        console.print(f"case {d.case_id}: {d.outcome}{extra} proposed by {d.proposed_by}; "
                      "another admin approves it with `custody cases approve`", highlight=False)


@cases_app.command("resolve")
@friendly
@audited("case.resolve", ("case_id",),
         details=("by", "resolution", "transaction", "outcome", "reason", "withdrawal"))
def resolve(
    case_id: Annotated[int, typer.Argument(help="Case id.")],
    by: Annotated[str, typer.Option(help="Who resolves it (an own-address case: the admin "
                                         "proposing).")],
    resolution: Annotated[str | None, typer.Option(help="How it was resolved (any case but "
                                                        "an own-address one).")] = None,
    transaction: Annotated[int | None, typer.Option(help="The new ledger transaction that "
                                                         "fixed it (it references the "
                                                         "case).")] = None,
    outcome: Annotated[str | None, typer.Option("--as", help="An own-address case: capital "
                                                             "(company money), return (of "
                                                             "--withdrawal) or refund (back to "
                                                             "the sender, minus the withdrawal "
                                                             "fee_max).")] = None,
    reason: Annotated[str | None, typer.Option(help="With --as: why.")] = None,
    withdrawal: Annotated[int | None, typer.Option(help="For --as return: the settled "
                                                        "withdrawal it returns.")] = None,
) -> None:
    """Resolve a case once (--resolution, and --transaction when the case is about a ledger
    transaction), or propose how to resolve an unattributed own-address case (--as, --reason;
    another admin approves with `custody cases approve`)."""
    from api.cli_reconcile import resolve_case
    from config.database import get_engine
    from config.uow import run_in_transaction
    from deposits import own
    from deposits.errors import CaseResolutionInvalid

    if outcome is None:
        if resolution is None:
            raise CaseResolutionInvalid("give --resolution TEXT (or --as for an own-address "
                                        "case)")
        resolve_case(case_id, by, resolution, transaction)
        return
    if reason is None:
        raise CaseResolutionInvalid("--as needs --reason")
    _decision(run_in_transaction(get_engine(), lambda uow: own.propose_resolution(
        uow, case_id, outcome=outcome, by=by, reason=reason, withdrawal_id=withdrawal)))


@cases_app.command("approve")
@friendly
@audited("case.approval", ("case_id",), details=("by",))
def approve(
    case_id: Annotated[int, typer.Argument(help="Case id.")],
    by: Annotated[str, typer.Option(help="The second admin (not the proposer).")],
    config: ConfigOption = None,
) -> None:
    """Approve a case's proposed resolution and carry it out (capital: the ledger transaction;
    return: the link to the withdrawal; refund: the withdrawal to the sender is checked, the
    resolution posted, the withdrawal requested). Approving a refund again completes a
    request that a crash interrupted; it never pays twice."""
    from api.own_addresses import Payouts, approve_case
    from config.database import get_engine

    def payouts() -> Payouts:
        from config.withdrawals import load_withdrawals_config

        chains = _chains(config)
        return Payouts(chains, load_withdrawals_config(chains, config))

    _decision(approve_case(get_engine(), case_id, by=by, now=datetime.now(UTC),
                           payouts=payouts))
