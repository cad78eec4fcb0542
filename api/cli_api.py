"""``custody keys create`` and ``custody api``: API keys and the HTTP server.

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
from typing import Annotated

import typer

from api.console import console, err_console, friendly

api_cli = typer.Typer(help="HTTP API: keys and the server.")
keys_app = typer.Typer(help="API keys (shown once, stored hashed).", no_args_is_help=True)
api_cli.add_typer(keys_app, name="keys")




@keys_app.command("create")
@friendly
def create(
    scope: Annotated[str, typer.Option(help="client, support, admin or approver.")],
    client: Annotated[str, typer.Option(help="Client (principal) the key belongs to; created "
                                             "if new. Its name is the actor in histories.")]
    = "default",
) -> None:
    """Create an API key and print it once (only its SHA-256 is stored)."""
    from api.auth import create_key
    from config.database import get_engine

    created = create_key(get_engine(), client, scope)
    err_console.print(f"key {created.prefix} ({created.scope}) for client {created.client_name};"
                      " shown once, store it now:", highlight=False)
    console.print(created.key, highlight=False, markup=False, soft_wrap=True)


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
