"""Every error ``code`` the engine can answer with, in one table.

The codes are the ``code`` attributes of the :class:`config.errors.CustodyError` subclasses
(their docstrings say what each means) and the few codes the HTTP layer's handlers answer
with themselves (``HANDLER_CODES``). ``catalogue`` collects them; the table is printed in the
OpenAPI description (``api.openapi``), in ``docs/errors.md`` and in the README, and
``tests/api/test_error_codes.py`` checks all three against the codes the source defines.

``python -m api.error_codes`` rewrites ``docs/errors.md`` and the README's table.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from config.errors import CustodyError

#: Packages whose modules may define engine errors; every module in them is imported.
PACKAGES = ("api", "chains", "config", "deposits", "ledger", "outgoing", "reconcile",
            "reserves", "sweeps", "withdrawals")
#: Codes answered by the handlers of ``api.problems`` and ``api.app`` rather than raised as
#: an engine error: (status, meaning).
HANDLER_CODES: dict[str, tuple[int, str]] = {
    "not_found": (404, "No route has this path."),
    "method_not_allowed": (405, "The path exists but does not serve this method; the Allow "
                                "header lists those it serves."),
    "database_busy": (503, "The database is busy (a serialization failure, a deadlock, a "
                           "timeout or too many connections); retry after Retry-After."),
    "http_error": (400, "Another HTTP-level refusal (the status says which)."),
}
#: Codes only the CLI prints (``error [code]: ...``; no HTTP answer carries them): meaning.
CLI_CODES: dict[str, str] = {
    "usage_invalid": "The command line is wrong (an unknown option, a missing argument, a bad "
                     "value); the message names the `--help` to read.",
    "flag_violated": "`custody rebuild-balances`: an account's replayed balance breaks its flag "
                     "(for example a wallet below zero); its stored row is kept, the others "
                     "are rebuilt, and the message names the account. Exit status 1.",
    "node_unavailable": "`custody treasury report`: a chain's node could not be read; the "
                        "ledger's figures are printed, the on-chain ones are missing (exit 2).",
    "seal_not_found": "`custody seal`: no seal has been made yet (run `custody seal run`).",
}
README_START = "<!-- error-codes:start -->"
README_END = "<!-- error-codes:end -->"
ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class ErrorCode:
    """One code: the statuses it answers with over HTTP (none: the CLI's alone) and what it
    means."""

    code: str
    statuses: tuple[int, ...]
    meaning: str


def _import_all() -> None:
    for name in PACKAGES:
        package = importlib.import_module(name)
        for info in pkgutil.walk_packages(package.__path__, f"{name}."):
            if info.name.endswith("__main__"):
                continue
            importlib.import_module(info.name)


def error_classes() -> list[type[CustodyError]]:
    """Every subclass of CustodyError defined in the engine's packages, base classes first."""
    _import_all()
    found: list[type[CustodyError]] = []
    todo: list[type[CustodyError]] = [CustodyError]
    while todo:
        cls = todo.pop(0)
        if cls.__module__.split(".")[0] in PACKAGES:
            found.append(cls)
        todo.extend(cls.__subclasses__())
    return found


def _meaning(cls: type[CustodyError]) -> str:
    doc = inspect.getdoc(cls) or ""
    paragraph = doc.split("\n\n")[0]
    return re.sub(r"\s+", " ", paragraph.replace("``", "`")).strip()


def catalogue() -> list[ErrorCode]:
    """Every code, sorted: from the error classes (the base-most class that has the code
    gives the meaning) and the handlers' own codes."""
    from api.problems import status_of

    statuses: dict[str, set[int]] = {}
    meanings: dict[str, str] = {}
    for cls in error_classes():
        code = cls.__dict__.get("code")
        if not isinstance(code, str):
            continue
        statuses.setdefault(code, set()).add(status_of(cls.__new__(cls)))
        meanings.setdefault(code, _meaning(cls))
    for code, (status, meaning) in HANDLER_CODES.items():
        statuses.setdefault(code, set()).add(status)
        meanings.setdefault(code, meaning)
    for code, meaning in CLI_CODES.items():
        statuses.setdefault(code, set())
        meanings.setdefault(code, meaning)
    return [ErrorCode(code, tuple(sorted(statuses[code])), meanings[code])
            for code in sorted(statuses)]


def codes() -> list[str]:
    """The codes the HTTP API can answer with, sorted (``Problem.code``'s enum)."""
    return [c.code for c in catalogue() if c.statuses]


def markdown_table() -> str:
    """The table as Markdown: code, HTTP status, meaning."""
    lines = ["| code | HTTP | meaning |", "|---|---|---|"]
    for c in catalogue():
        meaning = c.meaning.replace("|", "\\|")
        http = ", ".join(map(str, c.statuses)) or "CLI only"
        lines.append(f"| `{c.code}` | {http} | {meaning} |")
    return "\n".join(lines) + "\n"


def errors_document() -> str:
    """The text of docs/errors.md."""
    return (
        "# Error codes\n\n"
        "Every error the API answers is an `application/problem+json` document (RFC 9457) "
        "with a stable `code`, a `detail` for people and the `request_id`. The CLI prints the "
        "same code: `error [code]: detail`, exit status 2. This table is generated from the "
        "engine's error classes (`python -m api.error_codes`); the OpenAPI description at "
        "`/openapi.json` carries the same table, and a test keeps them equal.\n\n"
        + markdown_table()
    )


def readme_with_table(readme: str) -> str:
    """The README with its table (between the error-codes markers) replaced."""
    start, end = readme.index(README_START), readme.index(README_END)
    return readme[:start + len(README_START)] + "\n" + markdown_table() + readme[end:]


def main() -> None:
    """Rewrite docs/errors.md and the README's table."""
    (ROOT / "docs" / "errors.md").write_text(errors_document())
    readme = ROOT / "README.md"
    readme.write_text(readme_with_table(readme.read_text()))
    print(f"{len(catalogue())} error codes written to docs/errors.md and README.md",
          file=sys.stderr)


if __name__ == "__main__":
    main()
