"""What every ``custody`` command shares: the consoles, the error line and the error wrapper.

A module of its own so that ``api.cli`` and the command groups it mounts can all import it
without an import cycle.

An expected error is exactly one line on stderr, ``error [code]: message``, at any terminal
width and whether or not the output is piped, and the exit status is 2. The line is written
to stderr directly, not through rich: a console wraps long lines at its width (80 columns when
piped), and a caller reading the first line would miss the rest. Usage mistakes (an unknown
option, a missing argument, a value that does not parse) are the same kind of line with the
code ``usage_invalid``; an error that escapes a command's own handling is caught once more at
the entry point (:class:`CommandLine`).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar

import typer
from rich.console import Console

# typer vendors click (0.29): its own exception classes are the ones raised.
from typer._click.exceptions import ClickException, NoArgsIsHelpError, UsageError

from config.errors import CustodyError

#: Standard output never wraps a line itself: a hash, an address or an amount longer than the
#: rest of the line would be cut in two (a terminal still wraps it visually, whole).
console = Console(soft_wrap=True)
err_console = Console(stderr=True)
F = TypeVar("F", bound=Callable[..., Any])
#: The code of a command line used wrongly (printed by the CLI only; the API never answers it).
USAGE_INVALID = "usage_invalid"
#: The (code, message) of the newest error line printed: the reason of a command's audit row
#: when the command printed its error itself and exited (``api.cli_audit.audited``).
last_error: list[tuple[str, str]] = []


def one_line(text: str) -> str:
    """``text`` with its line breaks (and the blanks around them) folded into single spaces."""
    return re.sub(r"\s*[\r\n]+\s*", " ", text.strip())


def print_error(code: str, message: str) -> None:
    """Write ``error [code]: message`` to stderr as exactly one line."""
    last_error[:] = [(code, one_line(message))]
    sys.stderr.write(f"error [{code}]: {one_line(message)}\n")
    sys.stderr.flush()


def friendly(fn: F) -> F:
    """Turn expected errors into one line on stderr (``error [code]: message``) and exit 2."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except CustodyError as exc:
            print_error(exc.code, exc.message)
            raise typer.Exit(2) from None

    return wrapper  # type: ignore[return-value]


def _database_outage(exc: Exception) -> str | None:
    """What to say of a database that cannot be reached or stopped answering (SQLAlchemy's
    OperationalError: connection refused or lost, a timeout), None for anything else."""
    if "sqlalchemy" not in sys.modules:
        return None
    from sqlalchemy.exc import OperationalError

    if not isinstance(exc, OperationalError):
        return None
    return f"the database cannot be used: {exc.orig}"


class CommandLine(typer.Typer):
    """The ``custody`` application: typer's, with click's and the engine's expected errors
    printed as one line each (exit 2) instead of a box drawn at the terminal's width or a
    traceback."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        kwargs["standalone_mode"] = False
        try:
            result = super().__call__(*args, **kwargs)
        except NoArgsIsHelpError:
            sys.exit(2)  # typer has printed the help already.
        except UsageError as exc:
            hint = f" (see `{exc.ctx.command_path} --help`)" if exc.ctx is not None else ""
            print_error(USAGE_INVALID, exc.format_message() + hint)
            sys.exit(2)
        except ClickException as exc:
            print_error(USAGE_INVALID, exc.format_message())
            sys.exit(exc.exit_code)
        except typer.Abort:
            sys.stderr.write("aborted\n")
            sys.exit(1)
        except CustodyError as exc:  # raised outside a command's own handling (settings).
            print_error(exc.code, exc.message)
            sys.exit(2)
        except Exception as exc:
            outage = _database_outage(exc)
            if outage is None:
                raise  # a programmer error: typer's traceback
            print_error("database_unavailable", outage)
            sys.exit(2)
        # Without standalone mode, click hands back the exit status of a typer.Exit (and a
        # command's return value, None for every command here).
        sys.exit(result if isinstance(result, int) else 0)
