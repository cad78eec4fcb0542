"""What every ``custody`` command shares: the consoles and the error wrapper.

A module of its own so that ``api.cli`` and the command groups it mounts can all import it
without an import cycle.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar

import typer
from rich.console import Console

from config.errors import CustodyError

#: Standard output never wraps a line itself: a hash, an address or an amount longer than the
#: rest of the line would be cut in two (a terminal still wraps it visually, whole).
console = Console(soft_wrap=True)
err_console = Console(stderr=True)
F = TypeVar("F", bound=Callable[..., Any])


def friendly(fn: F) -> F:
    """Turn expected errors into one line on stderr (``error [code]: message``) and exit 2."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except CustodyError as exc:
            err_console.print(f"error [{exc.code}]: {exc.message}", highlight=False, markup=False,
                              soft_wrap=True)
            raise typer.Exit(2) from None

    return wrapper  # type: ignore[return-value]
