"""``custody allowlist list|add|remove``: destination allowlists from the command line, the
same entries as ``/v1/allowlist`` (``--json``: the API's shapes).

Mounted by ``api/cli.py``::

    from api.cli_allowlist import allowlist_app
    app.add_typer(allowlist_app, name="allowlist")

An address added here waits for the configured activation delay like one added through the
API (``[withdrawals.allowlist] activation_delay_s``): nothing here shortens it (that takes two
admins' votes, ``POST /v1/admin/allowlist/{id}/shorten``). The actor recorded is
``cli:<os user>``. Expected errors print one line (``error [code]: ...``) and exit with 2.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

import typer

from api.cli_audit import audited
from api.cli_reads import JsonOption
from api.console import console, friendly

allowlist_app = typer.Typer(help="Destination allowlists: list, add, remove.",
                            no_args_is_help=True)


def _os_user() -> str:
    import getpass

    try:
        return getpass.getuser()[:100] or "unknown"
    except (KeyError, OSError):  # No name for this uid (a container).
        return "unknown"


def _when(at: datetime | None) -> str:
    return "" if at is None else at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")


@allowlist_app.command("list")
@friendly
def list_entries(
    client: Annotated[str | None, typer.Option(help="Only this client's entries.")] = None,
    user: Annotated[str | None, typer.Option(help="Only the entries for this one user.")] = None,
    removed: Annotated[bool, typer.Option("--removed", help="Also list removed entries.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Allowlisted destinations by id, with their state now: pending (not usable before
    ``active at``), active or removed (``--json``: the API's ``AllowlistEntries``)."""
    from api.auth import client_named
    from api.render import grid, print_grid
    from api.routes.deps import utc_now
    from api.schemas_allowlist import AllowlistEntries, entry_view
    from config.database import get_engine
    from config.uow import UnitOfWork
    from withdrawals import service

    now = utc_now()
    with UnitOfWork(get_engine()) as uow:
        client_id = client_named(uow, client) if client is not None else None
        items = [entry_view(e, now) for e in service.list_entries(
            uow, client_id=client_id, user_id=user, removed=removed, limit=1_000_000)]
    if as_json:
        from api.cli_reads import print_json

        print_json(AllowlistEntries(items=items, has_more=False, next_cursor=None))
        return
    g = grid(None, "id", "client", "user", "chain", "address", "label", "active at", "state",
             right=("id",))
    for e in items:
        g.add_row(str(e.id), e.client, e.user_id or "(all)", e.chain, e.address, e.label,
                  _when(e.active_at), e.state)
    print_grid(console, g)


@allowlist_app.command("add")
@friendly
@audited("allowlist.add", ("client", "chain", "address", "user"), ("label", "key"))
def add(
    client: Annotated[str, typer.Argument(help="The API client whose allowlist it is.")],
    chain: Annotated[str, typer.Argument(help="Chain name as configured.")],
    address: Annotated[str, typer.Argument(help="The destination (EIP-55 checked).")],
    label: Annotated[str, typer.Option(help="A name for the destination.")],
    key: Annotated[str, typer.Option(help=(
        "Idempotency key (1-200 printable characters): running the command again with it "
        "adds nothing and prints the first entry."))],
    user: Annotated[str | None, typer.Option(help=(
        "Only for this user of the client (default: every user of the client)."))] = None,
    as_json: JsonOption = False,
) -> None:
    """Allowlist a destination; it is usable after the configured activation delay (the
    client is told by an ``allowlist.address_added`` webhook event)."""
    import re

    from api.auth import check_client_user, client_named
    from api.cli_withdrawals import _configs
    from api.idempotency import KEY_PATTERN
    from api.problems import RequestInvalid
    from api.routes.deps import utc_now
    from api.schemas_allowlist import entry_view
    from config.database import get_engine
    from config.uow import UnitOfWork
    from withdrawals import service

    if not re.fullmatch(KEY_PATTERN, key):
        raise RequestInvalid("--key is 1-200 printable ASCII characters without spaces")
    chains, cfg = _configs()
    chains.chain(chain)
    engine = get_engine()
    with UnitOfWork(engine) as uow:
        client_id = client_named(uow, client)
        if user is not None:
            check_client_user(uow, client_id, user)
    now = utc_now()
    added = service.add_address(engine, service.NewAddress(
        client_id=client_id, user_id=user, chain=chain, address=address, label=label,
        request_key=f"cli:{key}", added_by=f"cli:{_os_user()}"),
        delay_s=cfg.allowlist.activation_delay_s, now=now)
    view = entry_view(added.entry, now)
    if as_json:
        from api.cli_reads import print_json

        print_json(view)
        return
    what = "was already added" if added.replayed else "added"
    console.print(f"allowlist entry {view.id}: {view.address} on {view.chain} for "
                  f"{view.client} ({view.user_id or 'all users'}) {what}; usable from "
                  f"{_when(view.active_at)}", highlight=False, markup=False, soft_wrap=True)


@allowlist_app.command("remove")
@friendly
@audited("allowlist.remove", ("entry_id",))
def remove(
    entry_id: Annotated[int, typer.Argument(min=1, help="The entry's id.")],
    as_json: JsonOption = False,
) -> None:
    """Remove an allowlisted destination: withdrawals to it are refused at once (final)."""
    from api.routes.deps import utc_now
    from api.schemas_allowlist import entry_view
    from config.database import get_engine
    from withdrawals import service

    now = utc_now()
    entry, removed = service.remove_address(get_engine(), entry_id, by=f"cli:{_os_user()}",
                                            now=now)
    view = entry_view(entry, now)
    if as_json:
        from api.cli_reads import print_json

        print_json(view)
        return
    what = "removed" if removed else "was already removed"
    console.print(f"allowlist entry {view.id}: {view.address} on {view.chain} for "
                  f"{view.client} {what} at {_when(view.removed_at)}", highlight=False,
                  markup=False, soft_wrap=True)
