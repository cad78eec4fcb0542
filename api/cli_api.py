"""``custody keys create|list|revoke`` and ``custody api``: API keys and the HTTP server.

Mounted by ``api/cli.py``::

    from api.cli_api import api_cli
    app.add_typer(api_cli)

(no name: ``keys`` and ``api`` appear at the top level). Expected errors print one line
(``error [code]: ...``) and exit with 2.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Annotated

import typer

from api.cli_audit import audited, cli_actor
from api.console import console, err_console, friendly

api_cli = typer.Typer(help="HTTP API: keys and the server.")
keys_app = typer.Typer(help="API keys (shown once, stored hashed).", no_args_is_help=True)
api_cli.add_typer(keys_app, name="keys")


@keys_app.command("create")
@friendly
@audited("api_key.create", lambda kw: {"client": kw.get("client_name") or kw.get("client")},
         details=("scope", "expires_in", "expires_at"))
def create(
    scope: Annotated[str, typer.Option(help="client, support, admin or approver.")],
    client_name: Annotated[str | None, typer.Argument(
        metavar="CLIENT", help="Client (principal) the key belongs to; created if new. Its "
                               "name is the actor in histories.", show_default=False)] = None,
    client: Annotated[str | None, typer.Option(
        "--client", help="The same as CLIENT (the older spelling).")] = None,
    expires_in: Annotated[str | None, typer.Option(
        help="Lifetime from now: 90m, 12h, 30d, 2w.")] = None,
    expires_at: Annotated[str | None, typer.Option(
        help="Expiry instant, ISO 8601 (naive: UTC).")] = None,
) -> None:
    """Create an API key and print it once (only its SHA-256 is stored). Without CLIENT (or
    --client) the key is the client ``default``'s. Rotation: create the new key, move the
    client to it, then ``custody keys revoke`` the old one; both work in between."""
    from api.auth import create_key, parse_duration
    from api.problems import RequestInvalid
    from api.routes.deps import utc_now
    from api.schemas import parse_instant
    from config.database import get_engine

    if client_name is not None and client is not None and client_name != client:
        raise RequestInvalid("give the client once: CLIENT or --client")
    if expires_in is not None and expires_at is not None:
        raise RequestInvalid("give --expires-in or --expires-at, not both")
    now = utc_now()
    expires = (parse_instant(expires_at, what="--expires-at") if expires_at is not None
               else now + parse_duration(expires_in) if expires_in is not None else None)
    created = create_key(get_engine(), client_name or client or "default", scope,
                         expires_at=expires, now=now)
    until = f", expires {created.expires_at.isoformat()}" if created.expires_at else ""
    err_console.print(f"key {created.prefix} ({created.scope}) for client {created.client_name}"
                      f"{until}; shown once, store it now:", highlight=False, markup=False)
    console.print(created.key, highlight=False, markup=False, soft_wrap=True)


@keys_app.command("list")
@friendly
def list_keys(
    client: Annotated[str | None, typer.Option(help="Only this client's keys.")] = None,
    as_json: Annotated[bool, typer.Option(
        "--json", help="Print the API's JSON shape instead of a table.")] = False,
) -> None:
    """API keys by id: prefix, scope, client, created, last used, expiry and state (never a
    secret), as ``GET /v1/admin/api-keys`` answers them."""
    from api.auth import list_keys as keys_of
    from api.render import grid, print_grid
    from api.routes.deps import utc_now
    from api.schemas_keys import ApiKeyItems, key_item
    from config.database import get_engine

    now = utc_now()
    with get_engine().connect() as conn:
        items = [key_item(k, now) for k in keys_of(conn, client, limit=1_000_000)]
    if as_json:
        from api.cli_reads import print_json

        print_json(ApiKeyItems(items=items))
        return
    g = grid(None, "id", "prefix", "scope", "client", "created", "last used", "expires",
             "state", right=("id",))
    for k in items:
        g.add_row(str(k.id), k.prefix, k.scope, k.client, _when(k.created_at),
                  _when(k.last_used_at), _when(k.expires_at),
                  k.state if k.revoked_by is None else f"{k.state} by {k.revoked_by}")
    print_grid(console, g)


def _when(at: datetime | None) -> str:
    return "" if at is None else at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def key_reference(text: str) -> str:
    """What names a key given as ``PREFIX_OR_ID`` in its audit row: the prefix of a whole key
    (``cust_<prefix>_<secret>``), never its secret; a prefix or an id as given."""
    parts = text.strip().split("_")
    return parts[1] if len(parts) >= 3 and parts[0] == "cust" else text.strip()[:40]


@keys_app.command("revoke")
@friendly
@audited("api_key.revoke", lambda kw: {"key": key_reference(kw["key"])})
def revoke(
    key: Annotated[str, typer.Argument(metavar="PREFIX_OR_ID",
                                       help="The key's public prefix (12 hex digits) or id.")],
) -> None:
    """Revoke a key: every API process refuses it from its next request on."""
    from api.auth import revoke_key
    from api.routes.deps import utc_now
    from config.database import get_engine

    record, revoked = revoke_key(get_engine(), key, by=cli_actor(),
                                 now=utc_now())
    assert record.revoked_at is not None
    what = "revoked" if revoked else "was already revoked"
    console.print(f"key {record.prefix} ({record.scope}) of client {record.client_name} {what}"
                  f" at {_when(record.revoked_at)}", highlight=False, markup=False,
                  soft_wrap=True)


@api_cli.command("api")
@friendly
def serve(
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port.")] = 8000,
    config: Annotated[str | None, typer.Option(help="Configuration file "
                                                    "(default: $CUSTODY_CONFIG).")] = None,
    workers: Annotated[int, typer.Option(min=1, max=64, help=(
        "Server processes sharing the port (about one per core; the rate limits, idempotency "
        "records and everything else live in PostgreSQL, so they hold across processes)."))]
    = 1,
) -> None:
    """Serve the HTTP API with uvicorn (httptools and uvloop), in ``--workers`` processes."""
    import uvicorn

    from api.app import create_app_from_settings
    from config.logging import ensure_logging

    ensure_logging()

    # Built here even with several workers: a bad configuration or an unmigrated database is
    # reported once, in one line, before any process starts.
    app = create_app_from_settings(config_path=config)
    # log_config=None: uvicorn's lines go through config.logging's handler (JSON, redacted).
    if workers == 1:
        uvicorn.run(app, host=host, port=port, log_level="info", ws="none", log_config=None)
        return
    if config is not None:
        os.environ["CUSTODY_CONFIG"] = config  # Read again by each worker process.
    with shared_metrics_dir():
        uvicorn.run("api.app:create_app_from_settings", factory=True, host=host, port=port,
                    workers=workers, log_level="info", ws="none", log_config=None)


@contextmanager
def shared_metrics_dir() -> Iterator[str]:
    """A fresh directory for prometheus_client's multiprocess mode, named in the environment
    the workers inherit (``api.metrics``: each worker writes its HTTP counts there and the one
    a scrape reaches sums them all), removed when the server stops. An operator's own
    ``PROMETHEUS_MULTIPROC_DIR`` is used as it is (they empty it between runs)."""
    from api.metrics import MULTIPROC_ENV
    from config.logging import LEVEL_ENV, engine_level

    # The workers set up their logging again (api.app.create_app_from_settings): same level.
    os.environ.setdefault(LEVEL_ENV, engine_level())
    given = os.environ.get(MULTIPROC_ENV)
    if given:
        yield given
        return
    path = tempfile.mkdtemp(prefix="custody-metrics-")
    os.environ[MULTIPROC_ENV] = path
    try:
        yield path
    finally:
        os.environ.pop(MULTIPROC_ENV, None)
        shutil.rmtree(path, ignore_errors=True)
