"""``custody addresses``: a user's deposit addresses, assigned and listed from the command line.

The same code as ``POST /v1/users/{id}/deposit-addresses`` and its ``GET``: the chain is looked
up by :meth:`api.routes.deps.ApiContext.chain` (``chain_unknown``), the address source of its
family by :meth:`~api.routes.deps.ApiContext.address_source`, and the address is assigned by
:func:`deposits.service.assign_address` (the existing one if the user has one in that family).
``--json`` prints the API's shapes (``DepositAddress``, ``DepositAddresses``).

The command line acts as staff, for any client's user; a user neither the API nor the ledger
knows is ``user_not_found`` (the console's rule), so a typo never gets an address. The chain
configuration comes from ``$CUSTODY_CONFIG`` (or ``--config``). Expected errors print one line
(``error [code]: ...``) and exit 2; nothing is written then.

Mounted by ``api/cli.py`` with ``app.add_typer(addresses_app, name="addresses")``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from api.cli_audit import audited
from api.console import friendly

if TYPE_CHECKING:
    from api.routes.deps import ApiContext
    from config.uow import UnitOfWork

addresses_app = typer.Typer(help="A user's deposit addresses: assign and list.",
                            no_args_is_help=True)
ConfigOption = Annotated[str | None, typer.Option(help="Chain configuration file (default: "
                                                       "$CUSTODY_CONFIG).")]
UserArgument = Annotated[str, typer.Argument(help="User id.")]
JsonOption = Annotated[bool, typer.Option("--json", help="The API's JSON instead of lines.")]


def _context(config: str | None) -> ApiContext:
    from api.routes.deps import ApiContext
    from config.chains import load_chains_config
    from config.database import get_engine

    return ApiContext(engine=get_engine(), chains=load_chains_config(config), withdrawals=None)


def _require_user(uow: UnitOfWork, user_id: str) -> None:
    """UserNotFound unless the API (``api_users``) or the ledger (a balance) knows ``user_id``."""
    from api.problems import UserNotFound
    from api.repository.console import user_record
    from ledger import service as ledger

    if user_record(uow.conn, user_id) is None and not ledger.user_balances(uow, user_id):
        raise UserNotFound(f"no user {user_id}: neither the API nor the ledger knows this id")


@addresses_app.command("assign")
@friendly
@audited("deposit_address.assign", ("user_id", "chain"))
def assign(
    user_id: UserArgument,
    chain: Annotated[str, typer.Option(help="Chain name as configured (ethereum, ...).")],
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """The user's deposit address on CHAIN: the existing one, or a new one derived at the next
    index of the chain's family (every chain of a family shares it)."""
    from api.schemas import DepositAddress
    from config.uow import UnitOfWork
    from deposits import service as deposits

    ctx = _context(config)
    found = ctx.chain(chain)
    with UnitOfWork(ctx.engine) as uow:
        _require_user(uow, user_id)
        existing = deposits.address_of_user(uow, found.family, user_id)
        address = deposits.assign_address(uow, found.family, user_id,
                                          ctx.address_source(found.family))
        uow.commit()
    shown = DepositAddress(chain=found.name, family=found.family, address=address)
    if as_json:
        typer.echo(shown.model_dump_json())
        return
    state = "existing" if existing is not None else "assigned"
    typer.echo(f"{state}: {address} (user {user_id}, chain {found.name}, family {found.family})")


@addresses_app.command("list")
@friendly
def list_addresses(
    user_id: UserArgument,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """The user's deposit addresses, one line per configured chain whose family has one:
    chain, family, address (never shortened)."""
    from api.schemas import DepositAddress, DepositAddresses
    from config.uow import UnitOfWork
    from deposits import service as deposits

    ctx = _context(config)
    chains = sorted(ctx.chains.chains.values(), key=lambda c: c.name)
    with UnitOfWork(ctx.engine) as uow:
        _require_user(uow, user_id)
        by_family = {f: deposits.address_of_user(uow, f, user_id)
                     for f in sorted({c.family for c in chains})}
    shown = DepositAddresses(user_id=user_id, addresses=[
        DepositAddress(chain=c.name, family=c.family, address=address)
        for c in chains if (address := by_family[c.family]) is not None])
    if as_json:
        typer.echo(shown.model_dump_json())
        return
    if not shown.addresses:
        typer.echo(f"user {user_id} has no deposit address yet "
                   "(custody addresses assign USER --chain C)")
        return
    width = max(len(a.chain) for a in shown.addresses)
    family_width = max(len(a.family) for a in shown.addresses)
    for a in shown.addresses:
        typer.echo(f"{a.chain:<{width}}  {a.family:<{family_width}}  {a.address}")
