"""``custody sweeps``, ``custody cold`` and ``custody refills``: the movements between our own
addresses (``sweeps.service``), for operators.

Mounted by ``api/cli.py`` with ``app.add_typer(sweeps_cli)`` (no name: the three groups appear
at the top level). The configuration comes from ``$CUSTODY_CONFIG`` (or ``--config``). Admins
are named with ``--as``; a name is an admin when ``[withdrawals.roles] admins`` lists it (the
HTTP API uses the client of an admin-scoped key instead). Every read command takes ``--json``
and prints the HTTP API's body (``api.schemas_sweeps``); tables fold long values (hashes,
addresses, amounts) onto several lines instead of cutting them. Expected errors print one line
(``error [code]: ...``) and exit with 2; nothing is written then.
"""

from __future__ import annotations

import json
import re
import uuid
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated

import typer

from api.cli_audit import audited
from api.console import console, friendly
from api.render import Grid, print_grid

if TYPE_CHECKING:
    from pydantic import BaseModel

    from config.chains import ChainsConfig
    from config.sweeps import SweepsConfig
    from config.withdrawals import WithdrawalsConfig
    from sweeps.model import State
    from sweeps.service import Actor, Timeline

sweeps_cli = typer.Typer(help="Sweeps, cold transfers and refills.")
sweeps_app = typer.Typer(help="Sweeps of deposit addresses to the hot wallet.",
                         no_args_is_help=True)
cold_app = typer.Typer(help="Transfers from the hot wallet to cold, approved by admins.",
                       no_args_is_help=True)
refills_app = typer.Typer(help="Refills of the hot wallet from cold.", no_args_is_help=True)
sweeps_cli.add_typer(sweeps_app, name="sweeps")
sweeps_cli.add_typer(cold_app, name="cold")
sweeps_cli.add_typer(refills_app, name="refills")

ConfigOption = Annotated[str | None, typer.Option(help="Configuration file (default: "
                                                       "$CUSTODY_CONFIG).")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON (the API's body).")]
ChainOption = Annotated[str | None, typer.Option(help="Only this chain.")]
StateOption = Annotated[str | None, typer.Option(help="Only this state.")]
AsOption = Annotated[str, typer.Option("--as", help="The admin acting (listed in "
                                                    "\\[withdrawals.roles] admins).")]
KeyOption = Annotated[str | None, typer.Option(help="Request key (default: a new one, printed); "
                                                    "the same key again returns the first "
                                                    "request.")]
_MINOR = re.compile(r"^[0-9]{1,40}$")


def _configs(path: str | None) -> tuple[ChainsConfig, WithdrawalsConfig | None,
                                        SweepsConfig | None]:
    from api.configuration import load_sweeps_if_present, load_withdrawals_if_present
    from config.chains import load_chains_config

    chains = load_chains_config(path)
    wcfg = load_withdrawals_if_present(chains, path)
    return chains, wcfg, load_sweeps_if_present(chains, wcfg, path)


def _required(path: str | None) -> tuple[ChainsConfig, WithdrawalsConfig, SweepsConfig]:
    from sweeps.errors import SweepsNotConfigured

    chains, wcfg, scfg = _configs(path)
    if scfg is None or wcfg is None:
        raise SweepsNotConfigured("the configuration has no [sweeps] section: nothing is "
                                  "swept, sent to cold or refilled")
    return chains, wcfg, scfg


def _actor(wcfg: WithdrawalsConfig, name: str) -> Actor:
    from sweeps.service import Actor

    return Actor(name, admin=name in wcfg.admins)


def _minor(text: str, error: type[Exception]) -> int:
    """An amount given as minor units: digits only (no sign, decimal point or exponent)."""
    if not _MINOR.match(text):
        raise error(f"the amount must be an integer string of minor units, got {text[:50]!r}")
    return int(text)


def _state(text: str | None) -> list[State] | None:
    from sweeps.errors import SweepsError
    from sweeps.model import State

    if text is None:
        return None
    try:
        return [State(text)]
    except ValueError:
        raise SweepsError(f"no state {text!r} (one of {', '.join(s.value for s in State)})"
                          ) from None


def _echo(body: BaseModel) -> None:
    typer.echo(json.dumps(body.model_dump(mode="json")))


def _table(title: str, *columns: str) -> Grid:
    """A table whose cells wrap long values instead of cutting them."""
    table = Grid(title=title)
    for column in columns:
        table.add_column(column)
    return table


def _print(table: Grid) -> None:
    print_grid(console, table)


def _history(tl: Timeline) -> None:
    """The history and attempts of a movement."""
    events = _table("history", "at", "event", "from", "to", "actor", "reason", "ledger tx")
    for e in tl.events:
        events.add_row(e.occurred_at.isoformat(), e.event, e.from_state or "", e.to_state,
                       e.actor, e.reason or "", str(e.ledger_transaction_id or ""))
    _print(events)
    if tl.attempts:
        attempts = _table("attempts", "#", "tx hash", "nonce", "max fee/gas", "tip/gas",
                          "gas limit", "at")
        for a in tl.attempts:
            attempts.add_row(str(a.attempt_no), a.tx_hash, str(a.nonce), str(a.max_fee_per_gas),
                             str(a.max_priority_fee_per_gas), str(a.gas_limit),
                             a.created_at.isoformat())
        _print(attempts)


# --------------------------------------------------------------------------- sweeps


@sweeps_app.command("list")
@friendly
def list_sweeps(chain: ChainOption = None, state: StateOption = None,
                limit: Annotated[int, typer.Option(min=1, max=10_000)] = 200,
                as_json: JsonOption = False, config: ConfigOption = None) -> None:
    """Sweeps, newest first. A proposed sweep needs a signer: its address source (an xpub)
    holds no key, so the engine lists it and never signs it."""
    from api.schemas_sweeps import Sweeps, sweep_view
    from config.database import get_engine
    from sweeps import service
    from sweeps.model import Kind

    chains, _, _ = _configs(config)
    found = service.list_movements(get_engine(), Kind.SWEEP, chain=chain, states=_state(state),
                                   limit=limit)
    body = Sweeps(items=[sweep_view(chains, m) for m in found])
    if as_json:
        _echo(body)
        return
    table = _table("sweeps", "id", "chain", "state", "address", "asset", "available",
                   "swept", "nonce", "note")
    for s in body.items:
        note = ("needs a signer (xpub address source): sign it outside the engine"
                if s.needs_signer else f"waits for gas top-up {s.top_up_id}"
                if s.state == "waiting_gas" else s.state_reason or "")
        table.add_row(str(s.id), s.chain, s.state, s.address, s.asset, s.available.decimal,
                      s.swept_amount.decimal if s.swept_amount else "",
                      "" if s.nonce is None else str(s.nonce), note)
    _print(table)


@sweeps_app.command("show")
@friendly
def show_sweep(sweep_id: Annotated[int, typer.Argument(help="Sweep id.")],
               as_json: JsonOption = False, config: ConfigOption = None) -> None:
    """A sweep's timeline: history, attempts, and its gas top-ups with theirs."""
    from api.schemas_sweeps import sweep_timeline_view
    from config.database import get_engine
    from sweeps import service
    from sweeps.model import Kind

    chains, _, _ = _configs(config)
    tl = service.timeline(get_engine(), Kind.SWEEP, sweep_id)
    body = sweep_timeline_view(chains, tl)
    if as_json:
        _echo(body)
        return
    s = body.sweep
    console.print(f"sweep {s.id}: {s.state} on {s.chain}: {s.available.decimal} {s.asset} "
                  f"({s.available.units} units) from {s.address} to {s.destination}"
                  + ("; needs a signer (xpub address source)" if s.needs_signer else ""),
                  highlight=False, markup=False, soft_wrap=True)
    _history(tl)
    for top_up in tl.top_ups:
        t = top_up.movement
        console.print(f"gas top-up {t.id}: {t.state}, {t.amount('amount')} wei from "
                      f"{t.sender} to {t.data['address']}", highlight=False, markup=False,
                      soft_wrap=True)
        _history(top_up)


@sweeps_app.command("run")
@friendly
@audited("sweeps.run", ("chain",))
def run_sweeper(chain: Annotated[str, typer.Argument(help="Chain to step.")],
                as_json: JsonOption = False, config: ConfigOption = None) -> None:
    """One sweeper step of CHAIN now (plan due sweeps; top-ups, sweeps and approved cold
    transfers one phase further), once the chain's configuration agrees with its node."""
    from api.jobs import require_agreement
    from api.schemas_sweeps import step_view
    from config.database import get_engine
    from sweeps import runner
    from sweeps.errors import SweepsNotConfigured

    chains, wcfg, scfg = _required(config)
    if chains.chain(chain).name not in scfg.chains():
        raise SweepsNotConfigured(f"[sweeps] lists no asset of chain {chain}")
    ctx = runner.build_context(chains, wcfg, scfg, chain)
    engine = get_engine()
    require_agreement(engine, ctx.chain, datetime.now(UTC))
    body = step_view(chain, runner.step(engine, ctx, now=datetime.now(UTC)))
    if as_json:
        _echo(body)
        return
    counts = body.model_dump(exclude={"chain", "dust", "skipped_locked"})
    console.print(f"sweeper step on {chain}: " + ", ".join(f"{k.replace('_', ' ')} {v}"
                                                          for k, v in counts.items())
                  + (" (skipped: another process is stepping this chain)"
                     if body.skipped_locked else ""), highlight=False, soft_wrap=True)
    if body.dust:
        table = _table("left as dust", "address", "asset", "amount (units)", "max gas (wei)")
        for d in body.dust:
            table.add_row(d.address, d.asset, d.amount, d.max_gas_wei)
        _print(table)


# --------------------------------------------------------------------------- cold transfers


def _cold_line(body: BaseModel) -> str:
    from api.schemas_sweeps import ColdTransfer

    assert isinstance(body, ColdTransfer)
    approved = [d.approver for d in body.decisions if d.decision == "approve"]
    return (f"cold transfer {body.id}: {body.state}, {body.amount.decimal} {body.asset} "
            f"({body.amount.minor} minor units) on {body.chain} from {body.sender} to "
            f"{body.destination}; proposed by {body.proposed_by}; approvals "
            f"{len(approved)} of {body.approvals_required}"
            + (f" ({', '.join(approved)})" if approved else ""))


@cold_app.command("propose")
@friendly
@audited("cold_transfer.propose", ("chain", "asset"), details=("amount", "reason", "as_", "key"))
def propose(chain: Annotated[str, typer.Option(help="Chain of the hot wallet.")],
            asset: Annotated[str, typer.Option(help="Ledger asset code (ETH, USDC...).")],
            amount: Annotated[str, typer.Option(help="Minor units of the asset, digits only.")],
            reason: Annotated[str, typer.Option(help="Why.")],
            as_: AsOption, key: KeyOption = None, as_json: JsonOption = False,
            config: ConfigOption = None) -> None:
    """Propose moving AMOUNT from the chain's hot wallet to the asset's cold address; it is
    signed once other admins approved it (two above cold_dual_approval_above)."""
    from api.schemas_sweeps import cold_view
    from config.database import get_engine
    from sweeps import service
    from sweeps.errors import ColdTransferInvalid

    chains, wcfg, scfg = _required(config)
    plan = service.plan_cold_transfer(chains, wcfg, scfg, service.ColdProposal(
        chain, asset, _minor(amount, ColdTransferInvalid), reason))
    idem = key or uuid.uuid4().hex
    done = service.propose_cold_transfer(get_engine(), plan, actor=_actor(wcfg, as_),
                                         request_key=f"cli:{idem}", now=datetime.now(UTC))
    body = cold_view(chains, done.movement, [])
    if as_json:
        typer.echo(json.dumps({**body.model_dump(mode="json"), "key": idem,
                               "replayed": done.replayed}))
        return
    console.print(_cold_line(body) + f" (key {idem})"
                  + (" (replayed: proposed before under this key)" if done.replayed else ""),
                  highlight=False, markup=False, soft_wrap=True)


def _decide(cold_id: int, decision: str, name: str, reason: str | None, as_json: bool,
            config: str | None) -> None:
    from api.schemas_sweeps import cold_view
    from config.database import get_engine
    from sweeps import service
    from sweeps.model import Kind

    chains, wcfg, _ = _required(config)
    engine = get_engine()
    service.decide_cold_transfer(engine, cold_id, actor=_actor(wcfg, name), decision=decision,
                                 reason=reason, now=datetime.now(UTC))
    tl = service.timeline(engine, Kind.COLD_TRANSFER, cold_id)
    body = cold_view(chains, tl.movement, tl.decisions)
    if as_json:
        _echo(body)
        return
    console.print(_cold_line(body), highlight=False, markup=False, soft_wrap=True)


@cold_app.command("approve")
@friendly
@audited("cold_transfer.decision", ("cold_id",), details=("as_", "reason"),
         decision="approve")
def approve(cold_id: Annotated[int, typer.Argument(help="Cold transfer id.")], as_: AsOption,
            reason: Annotated[str | None, typer.Option(help="Why (optional).")] = None,
            as_json: JsonOption = False, config: ConfigOption = None) -> None:
    """Approve a proposed cold transfer (not the proposer; once per admin)."""
    _decide(cold_id, "approve", as_, reason, as_json, config)


@cold_app.command("reject")
@friendly
@audited("cold_transfer.decision", ("cold_id",), details=("as_", "reason"),
         decision="reject")
def reject(cold_id: Annotated[int, typer.Argument(help="Cold transfer id.")], as_: AsOption,
           reason: Annotated[str, typer.Option(help="Why (required).")],
           as_json: JsonOption = False, config: ConfigOption = None) -> None:
    """Reject a proposed cold transfer: it ends, nothing is sent."""
    _decide(cold_id, "reject", as_, reason, as_json, config)


@cold_app.command("list")
@friendly
def list_cold(chain: ChainOption = None, state: StateOption = None,
              limit: Annotated[int, typer.Option(min=1, max=10_000)] = 200,
              as_json: JsonOption = False, config: ConfigOption = None) -> None:
    """Cold transfers, newest first, with the admins' decisions."""
    from api.schemas_sweeps import ColdTransfers, cold_view
    from config.database import get_engine
    from sweeps import service

    chains, _, _ = _configs(config)
    found = service.list_cold_transfers(get_engine(), chain=chain, states=_state(state),
                                        limit=limit)
    body = ColdTransfers(items=[cold_view(chains, m, d) for m, d in found])
    if as_json:
        _echo(body)
        return
    table = _table("cold transfers", "id", "chain", "state", "asset", "amount", "to",
                   "approvals", "proposed by", "reason")
    for c in body.items:
        approved = [d.approver for d in c.decisions if d.decision == "approve"]
        table.add_row(str(c.id), c.chain, c.state, c.asset, c.amount.decimal, c.destination,
                      f"{len(approved)}/{c.approvals_required} {' '.join(approved)}".strip(),
                      c.proposed_by, c.state_reason or c.reason)
    _print(table)


@cold_app.command("show")
@friendly
def show_cold(cold_id: Annotated[int, typer.Argument(help="Cold transfer id.")],
              as_json: JsonOption = False, config: ConfigOption = None) -> None:
    """A cold transfer's timeline: decisions, history, attempts."""
    from api.schemas_sweeps import cold_timeline_view
    from config.database import get_engine
    from sweeps import service
    from sweeps.model import Kind

    chains, _, _ = _configs(config)
    tl = service.timeline(get_engine(), Kind.COLD_TRANSFER, cold_id)
    body = cold_timeline_view(chains, tl)
    if as_json:
        _echo(body)
        return
    console.print(_cold_line(body.cold_transfer), highlight=False, markup=False,
                  soft_wrap=True)
    for d in body.cold_transfer.decisions:
        console.print(f"{d.approver} {d.decision}d at {d.decided_at.isoformat()}"
                      + (f": {d.reason}" if d.reason else ""), highlight=False, markup=False,
                      soft_wrap=True)
    _history(tl)


# --------------------------------------------------------------------------- refills


@refills_app.command("request")
@friendly
@audited("refill.request", ("chain", "asset"),
         details=("amount", "reason", "as_", "source", "key"))
def request(chain: Annotated[str, typer.Option(help="Chain of the hot wallet.")],
            asset: Annotated[str, typer.Option(help="Ledger asset code (ETH, USDC...).")],
            amount: Annotated[str, typer.Option(help="Minor units of the asset, digits only.")],
            reason: Annotated[str, typer.Option(help="Why.")], as_: AsOption,
            source: Annotated[str | None, typer.Option(help="Cold address it comes from "
                                                            "(default: the asset's).")] = None,
            key: KeyOption = None, as_json: JsonOption = False,
            config: ConfigOption = None) -> None:
    """Expect AMOUNT from a cold address to the hot wallet: once final, the transfer of
    exactly that amount is matched to this request and booked internal (custody unchanged).
    The transfer itself is signed outside the engine (cold addresses are watch-only)."""
    from api.schemas_sweeps import refill_view
    from config.database import get_engine
    from sweeps import service
    from sweeps.errors import RefillInvalid

    chains, wcfg, scfg = _required(config)
    plan = service.plan_refill(chains, wcfg, scfg, service.RefillAsk(
        chain, asset, _minor(amount, RefillInvalid), source, reason))
    idem = key or uuid.uuid4().hex
    found, replayed = service.request_refill(get_engine(), plan, actor=_actor(wcfg, as_),
                                             request_key=f"cli:{idem}", now=datetime.now(UTC))
    body = refill_view(chains, found)
    if as_json:
        typer.echo(json.dumps({**body.model_dump(mode="json"), "key": idem,
                               "replayed": replayed}))
        return
    console.print(f"refill request {body.id}: send exactly {body.amount_onchain.units} units "
                  f"({body.amount.decimal} {body.asset}) from {body.source} to "
                  f"{body.destination} on {body.chain} (key {idem})"
                  + (" (replayed: requested before under this key)" if replayed else ""),
                  highlight=False, markup=False, soft_wrap=True)


@refills_app.command("list")
@friendly
def list_refills(chain: ChainOption = None,
                 state: Annotated[str | None, typer.Option(help="open, matched or canceled.")]
                 = None,
                 limit: Annotated[int, typer.Option(min=1, max=10_000)] = 200,
                 as_json: JsonOption = False, config: ConfigOption = None) -> None:
    """Refill requests, newest first; a matched one names the transfer that fulfilled it."""
    from api.schemas_sweeps import Refills, refill_view
    from config.database import get_engine
    from sweeps import service

    chains, _, _ = _configs(config)
    body = Refills(items=[refill_view(chains, r) for r in service.list_refills(
        get_engine(), chain=chain, state=state, limit=limit)])
    if as_json:
        _echo(body)
        return
    table = _table("refill requests", "id", "chain", "state", "asset", "amount", "from", "to",
                   "requested by", "matched transfer")
    for r in body.items:
        table.add_row(str(r.id), r.chain, r.state, r.asset, r.amount.decimal, r.source,
                      r.destination, r.requested_by,
                      f"{r.matched_tx_hash}:{r.matched_position}" if r.matched_tx_hash else "")
    _print(table)
