"""``custody secrets``: the key the stored secrets are sealed under (``config.encryption``).

Mounted by ``api/cli.py`` as ``app.add_typer(secrets_app, name="secrets")``. ``rotate-key``
re-wraps every stored secret under ``CUSTODY_SECRETS_KEY`` (the previous key, still needed to
open them, in ``CUSTODY_SECRETS_KEY_OLD``), while the engine keeps running; ``status`` says how
many are still under another key. Neither prints a secret or a key, only key ids and counts.
"""

from __future__ import annotations

from typing import Annotated

import typer

from api.cli_audit import audited
from api.console import console, friendly

secrets_app = typer.Typer(
    help="The secrets key: webhook and console secrets are stored sealed under "
         "CUSTODY_SECRETS_KEY (README, \"Secrets at rest\").", no_args_is_help=True)


@secrets_app.command("rotate-key")
@friendly
@audited("secrets.rotate_key", (), ("batch",))
def rotate_key(
    batch: Annotated[int, typer.Option(min=1, max=10_000,
                                       help="Rows re-wrapped per committed batch.")] = 200,
) -> None:
    """Re-wrap every stored secret under CUSTODY_SECRETS_KEY (those under
    CUSTODY_SECRETS_KEY_OLD, set to the previous key, are opened with it). Signing goes on
    meanwhile; safe to run again. When it reports none left, drop CUSTODY_SECRETS_KEY_OLD."""
    from api.sealed_secrets import rotate_key as rotate
    from api.sealed_secrets import stored_under_other_keys
    from config.database import get_engine

    engine = get_engine()
    report = rotate(engine, batch_max=batch)
    left = stored_under_other_keys(engine)
    console.print(f"re-wrapped under key {report.key_id}: {report.endpoints} webhook endpoints, "
                  f"{report.console} console secret, {report.answers} stored answers; "
                  f"{left} still under another key"
                  + (" (changed meanwhile: run it again)" if left else
                     " (CUSTODY_SECRETS_KEY_OLD can be dropped)"), highlight=False)


@secrets_app.command("status")
@friendly
def status() -> None:
    """The current key's id and how many stored secrets are still sealed under another key."""
    from api.sealed_secrets import stored_under_other_keys
    from config.database import get_engine
    from config.encryption import keyring

    keys = keyring()
    left = stored_under_other_keys(get_engine(), keys=keys)
    old = "" if keys.old is None else f", old key {keys.old.id}"
    console.print(f"current key {keys.current.id}{old}; {left} stored secrets under another "
                  "key", highlight=False)
