"""The definition files: the current text of every SQL function, trigger and view, one file each.

``sql/functions/<name>.sql`` holds one function (with its owner, grants and comment);
``sql/triggers/<table>.sql`` holds every trigger of one table and the trigger functions that only
that table uses; ``sql/views/<name>.sql`` one view. Each file is written to be applied again at
any time (``CREATE OR REPLACE FUNCTION``, ``DROP TRIGGER IF EXISTS`` + ``CREATE TRIGGER``, grants
restated), so that the file is what runs, and a reader never replays a chain of revisions to
learn it. Versioned revisions (``sql/revisions/``) hold only tables, columns, constraints,
indexes, roles, table grants, data changes, drops and signature changes.

The runner applies them after the revisions, in the same database transaction, the way Flyway
applies its repeatable migrations: functions first, then triggers, then views, each kind in file
name order. It records the SHA-256 of every file it applied in ``schema_definitions`` and applies
again only the files whose hash changed, except after a revision ran in the same upgrade: a
revision may have dropped or altered what a definition relies on, so then every file is applied.
A function or trigger that no file defines any more is dropped by a revision; its file's row is
removed here.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEFINITIONS_DIR = Path(__file__).resolve().parent / "sql"

#: The kinds of definition file, in the order they are applied: a trigger needs its function,
#: a view may call a function.
KINDS = ("functions", "triggers", "views")


@dataclass(frozen=True)
class Definition:
    """One definition file: its path below ``sql/``, its text and the SHA-256 of the text."""

    path: str
    sql: str
    sha256: str


def definitions(root: Path = DEFINITIONS_DIR) -> list[Definition]:
    """Every definition file, in the order they are applied."""
    found: list[Definition] = []
    for kind in KINDS:
        for file in sorted((root / kind).glob("*.sql")):
            text = file.read_text()
            found.append(Definition(f"{kind}/{file.name}", text,
                                    hashlib.sha256(text.encode()).hexdigest()))
    return found


def pending(applied: Mapping[str, str], files: list[Definition]) -> list[Definition]:
    """The files whose text differs from what ``applied`` (path -> SHA-256) says was applied."""
    return [d for d in files if applied.get(d.path) != d.sha256]


def stale(applied: Mapping[str, str], files: list[Definition]) -> list[str]:
    """Paths recorded as applied that no file has any more (a revision dropped their objects)."""
    present = {d.path for d in files}
    return sorted(p for p in applied if p not in present)


def apply(driver: Any, *, everything: bool) -> list[str]:
    """Apply the changed definition files (all of them if ``everything``) on a psycopg
    connection inside the upgrade's transaction; return the paths applied."""
    files = definitions()
    with driver.cursor() as cur:
        cur.execute("SELECT path, sha256 FROM schema_definitions")
        applied = {path: digest for path, digest in cur.fetchall()}
        todo = files if everything else pending(applied, files)
        for definition in todo:
            # Several statements per file: without parameters psycopg sends the text as one
            # simple query (no placeholder parsing), as the revisions' SQL files are sent.
            cur.execute(definition.sql)
            cur.execute(
                "INSERT INTO schema_definitions (path, sha256) VALUES (%s, %s) "
                "ON CONFLICT (path) DO UPDATE SET sha256 = EXCLUDED.sha256, "
                "applied_at = clock_timestamp()",
                (definition.path, definition.sha256))
        for path in stale(applied, files):
            cur.execute("DELETE FROM schema_definitions WHERE path = %s", (path,))
    return [d.path for d in todo]
