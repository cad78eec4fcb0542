"""What the read commands of the ``custody`` command line share: the ``--json`` option and its
printer, the check that a user exists, and the ledger's assets as a chain configuration for
the API's own view functions (``api.routes.views``).

``--json`` prints the API's response models (``api.schemas*``) serialised as the API
serialises them (``model_dump_json``), so a script reads the same shapes from both; the
commands that have no API route (``verify``, ``seal verify``, ``withdrawals open``, ...) print
their report with ``print_report``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from collections.abc import Iterable, Sequence
from contextlib import suppress
from datetime import UTC, datetime
from typing import Annotated, Any, TypeVar

import typer
from pydantic import BaseModel

from config.chains import CONFIG_ENV, AssetConfig, ChainsConfig, load_chains_config
from config.uow import UnitOfWork
from ledger.model import Account
from ledger.repository import TransactionRecord

M = TypeVar("M", bound=BaseModel)

#: The ``--json`` option of every read command.
JsonOption = Annotated[bool, typer.Option(
    "--json", help="Print the API's JSON shape instead of tables.")]


def print_json(body: BaseModel | bytes) -> None:
    """Print a response model (or an already serialised body) as the API sends it, one line."""
    data = body if isinstance(body, bytes) else body.model_dump_json().encode()
    sys.stdout.write(data.decode() + "\n")
    sys.stdout.flush()


def print_report(data: Any) -> None:
    """Print a report of a command the API has no route for, as one JSON line: dataclasses
    as objects, times in ISO 8601 UTC, enums as their values. Ids and amounts are strings
    where the caller puts them so (numbers that can exceed 2^53 always are)."""
    def encode(value: Any) -> Any:
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
        if isinstance(value, datetime):
            return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
        raise TypeError(f"not JSON: {type(value).__name__}")

    sys.stdout.write(json.dumps(data, default=encode, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def discrepancies_json(found: Sequence[Any]) -> list[dict[str, str]]:
    """Findings of ``verify`` or ``seal verify`` as objects (kind, subject, expected,
    observed)."""
    return [{"kind": d.kind, "subject": d.subject, "expected": d.expected,
             "observed": d.observed} for d in found]


def page(model: type[M], **values: Any) -> M:
    """A page model (``DepositPage`` and the like) from those of ``values`` it has fields for:
    the listing shape may gain or lose fields (``has_more``, ``next_cursor``) without every
    command changing with it."""
    return model(**{k: v for k, v in values.items() if k in model.model_fields})


def require_user(uow: UnitOfWork, user_id: str) -> None:
    """UserNotFound (``user_not_found``) unless the API or the engine knows ``user_id``: a user
    created through the API, or one with a ledger account, a deposit address or a deposit."""
    from api.problems import UserNotFound
    from api.repository import console as console_repo
    from deposits import service as deposits
    from ledger import service as ledger

    if (console_repo.user_record(uow.conn, user_id) is not None
            or ledger.user_balances(uow, user_id)
            or deposits.user_has_address(uow, user_id)
            or deposits.user_deposits(uow, user_id, limit=1)):
        return
    raise UserNotFound(f"no user {user_id}: neither the API nor the ledger knows this id")


def accounts_of(uow: UnitOfWork, transactions: Iterable[TransactionRecord]
                ) -> dict[int, Account]:
    """The ledger accounts of every posting of ``transactions``, by id (to name them by code)."""
    from ledger import service as ledger

    ids = sorted({p.account_id for t in transactions for p in t.postings})
    return ledger.accounts_by_ids(uow, ids) if ids else {}


def ledger_assets(uow: UnitOfWork, codes: Iterable[str | None]) -> ChainsConfig:
    """The assets among ``codes`` as a chain configuration without chains: what
    ``api.routes.views`` needs to render amounts. Scales come from the ledger, and for an
    asset the ledger has not opened yet (a deposit not credited) from the configuration file
    when ``$CUSTODY_CONFIG`` names one; an asset known to neither is left out (the views then
    render minor units, as the API does for an asset it does not know)."""
    from ledger import service as ledger
    from ledger.errors import AssetNotFound

    wanted = {code for code in codes if code is not None}
    assets = {}
    for code in wanted:
        with suppress(AssetNotFound):
            assets[code] = AssetConfig(code=code, scale=ledger.get_asset(uow, code).scale)
    if wanted - set(assets) and os.environ.get(CONFIG_ENV):
        configured = load_chains_config().assets  # A broken file is an error, not ignored.
        assets.update({code: configured[code] for code in wanted - set(assets)
                       if code in configured})
    return ChainsConfig(assets=assets, chains={})
