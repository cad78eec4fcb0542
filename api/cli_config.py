"""``custody config check``: the configuration file, checked against each chain's node.

Mounted by ``api/cli.py``::

    from api.cli_config import config_app
    app.add_typer(config_app, name="config")

The check is the one every chain's jobs pass before they step (``api.jobs.ChainGate``, reading
through ``chains.probe``): ``eth_chainId`` against ``chain_id`` and each listed token's
``decimals()`` against its ``decimals``, with each token's ``symbol()`` recorded. It needs no
database and writes nothing (the jobs raise the alert when they refuse a chain).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

import typer

from api.console import console, err_console, friendly
from api.render import Grid, print_grid

if TYPE_CHECKING:
    from chains.probe import ProbeReport
    from config.chains import ChainConfig
    from config.sweeps import SweepAssetConfig

config_app = typer.Typer(help="The configuration file: check it against the chains' nodes.",
                         no_args_is_help=True)


@dataclass(frozen=True)
class ChainOutcome:
    """One chain's check: its report, or why the node could not be asked."""

    chain: str
    #: None when the node could not be asked (then ``error_code`` and ``error`` say why).
    report: ProbeReport | None
    error_code: str | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        """Whether the chain's configuration was checked and agrees."""
        return self.report is not None and self.report.ok

    def as_json(self) -> dict[str, Any]:
        """The chain's part of ``--json``."""
        findings = [] if self.report is None else [
            {"field": f.field, "configured": f.configured, "observed": f.observed,
             "ok": f.ok, "checked": f.checked} for f in self.report.findings]
        return {"chain": self.chain, "ok": self.ok, "reachable": self.report is not None,
                "error": self.error, "findings": findings}

    def error_lines(self) -> list[str]:
        """The lines this chain writes on stderr (one per mismatch, or the node's error)."""
        if self.report is None:
            return [f"error [{self.error_code}]: chain {self.chain}: the node could not be "
                    f"checked: {self.error}"]
        return [f"error [config_mismatch]: {f.line()}" for f in self.report.mismatches]


def _check(chain: ChainConfig) -> ChainOutcome:
    from api.jobs import check_chain
    from chains.errors import ChainError

    try:
        return ChainOutcome(chain.name, check_chain(chain))
    except ChainError as exc:
        # Unreachable (RpcUnavailable) or an answer that makes no sense (RpcResponseInvalid,
        # an RpcError on eth_chainId): nothing could be compared.
        return ChainOutcome(chain.name, None, exc.code, exc.message)


def _table(outcome: ChainOutcome) -> Grid:
    assert outcome.report is not None
    table = Grid(title=f"chain {outcome.chain}")
    for column in ("chain", "field", "configured", "observed", "ok"):
        table.add_column(column)
    for f in outcome.report.findings:
        ok = ("yes" if f.ok else "NO") if f.checked else ("recorded" if f.ok else "unread")
        table.add_row(outcome.chain, f.field, f.configured, f.observed, ok)
    return table


def _sweep_line(a: SweepAssetConfig) -> str:
    """One swept asset of ``custody config check``: its threshold and hot limits (decimals of
    the ledger asset) and where the excess goes."""
    from ledger.model import format_amount

    def shown(minor: int | None) -> str:
        return "-" if minor is None else format_amount(minor, a.scale)

    return (f"{a.asset} on {a.chain}: sweep above {shown(a.threshold_minor)}, hot "
            f"{shown(a.hot_min_minor)}..{shown(a.hot_max_minor)}, cold {a.cold_address or '-'}")


@config_app.command("check")
@friendly
def check(
    config: Annotated[str | None, typer.Option(help="Configuration file "
                                                    "(default: $CUSTODY_CONFIG).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the findings as JSON "
                                                         "instead of tables.")] = False,
) -> None:
    """Check the configuration file against every chain's node; exit 2 on a mismatch.

    The file must load, its withdrawals table and sweeps section too when there are. Per
    chain: eth_chainId against chain_id, each token's decimals() against its decimals; each
    token's symbol() is read and shown, never a reason to refuse.

    Exit 0 when everything agrees. Exit 2 on a mismatch (one line per mismatch on stderr,
    "chain C: FIELD is X in the configuration, the node says Y"), when a node cannot be
    reached, or when the file does not load. Needs no database. The scheduler runs the same
    check before a chain's jobs and refuses a chain that disagrees.
    """
    from api.configuration import load_sweeps_if_present, load_withdrawals_if_present
    from config.chains import load_chains_config

    chains = load_chains_config(config)
    wcfg = load_withdrawals_if_present(chains, config)
    scfg = load_sweeps_if_present(chains, wcfg, config)
    outcomes = [_check(chain) for chain in chains.chains.values()]
    withdrawals = ("not configured (no [withdrawals] table: withdrawal requests are refused)"
                   if wcfg is None else
                   "configured (hot wallets: " + (", ".join(sorted(wcfg.hot_wallets)) or "none")
                   + ")")
    sweeps = ("not configured (no [sweeps] section: nothing is swept, sent to cold or "
              "refilled)" if scfg is None else
              "configured (" + ("; ".join(_sweep_line(a) for a in scfg.assets.values())
                                or "no assets") + ")")
    if as_json:
        typer.echo(json.dumps({
            "ok": all(o.ok for o in outcomes), "withdrawals_configured": wcfg is not None,
            "sweeps_configured": scfg is not None,
            "chains": [o.as_json() for o in outcomes]}, indent=2))
    else:
        for outcome in outcomes:
            if outcome.report is not None:
                print_grid(console, _table(outcome))
        console.print(f"withdrawals: {withdrawals}", highlight=False, markup=False)
        console.print(f"sweeps: {sweeps}", highlight=False, markup=False, soft_wrap=True)
    for outcome in outcomes:
        for line in outcome.error_lines():
            err_console.print(line, highlight=False, markup=False, soft_wrap=True)
    if not all(o.ok for o in outcomes):
        raise typer.Exit(2)
    if not as_json:
        console.print(f"ok: {len(outcomes)} chains agree with their nodes", highlight=False)
