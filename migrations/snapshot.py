"""The schema snapshot, ``migrations/schema.sql``: the whole schema of a freshly migrated database.

It is ``pg_dump --schema-only`` (tables, constraints, indexes, functions, triggers, grants,
comments) with the two things that depend on the machine taken out: pg_dump's version lines, and
the name of the login that ran the migrations, which owns most objects (written as
``CURRENT_USER``). tests/migrations checks it against a freshly migrated database and against
upgrades from earlier revisions, so that every change to the database shows up in review as a
diff of this one file. ``python -m migrations.snapshot`` (``make schema``) writes it anew.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import sqlalchemy as sa

from migrations import SCHEMA_SNAPSHOT


def pg_dump_binary() -> str:
    """The embedded server's own pg_dump (same major version), else the one on PATH."""
    try:
        from pgserver._commands import POSTGRES_BIN_PATH

        bundled = Path(POSTGRES_BIN_PATH) / "pg_dump"
        if bundled.exists():
            return str(bundled)
    except ImportError:
        pass
    found = shutil.which("pg_dump")
    if found is None:
        raise RuntimeError("no pg_dump: install pgserver (a project dependency) or PostgreSQL")
    return found


def normalize(dump: str, owner: str) -> str:
    """The dump without its version lines, with the migration login written as CURRENT_USER."""
    quoted = re.escape(owner) if re.fullmatch(r"[a-z_][a-z0-9_$]*", owner) else (
        re.escape('"' + owner.replace('"', '""') + '"'))
    lines = [line for line in dump.splitlines()
             if not line.startswith(("-- Dumped from database version", "-- Dumped by pg_dump"))]
    text = "\n".join(lines).strip() + "\n"
    text = re.sub(rf"\b(OWNER TO|TO|FROM) {quoted};", r"\1 CURRENT_USER;", text)
    return re.sub(rf"; Owner: {re.escape(owner)}$", "; Owner: CURRENT_USER", text, flags=re.M)


def dump(url: str) -> str:
    """The normalized schema of the database at ``url`` (an owner login's URL)."""
    parsed = sa.make_url(url).set(drivername="postgresql")
    engine = sa.create_engine(parsed, poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as conn:
            owner = str(conn.exec_driver_sql("SELECT current_user").scalar_one())
    finally:
        engine.dispose()
    out = subprocess.run(
        [pg_dump_binary(), "--schema-only", "--no-tablespaces",
         f"--dbname={parsed.render_as_string(hide_password=False)}"],
        check=True, capture_output=True, text=True, timeout=120)
    return normalize(out.stdout, owner)


def fresh_schema() -> str:
    """Migrate a new database on a temporary embedded server and dump it."""
    import migrations
    from config.database import embedded_url, owner_engine, with_database

    with tempfile.TemporaryDirectory(prefix="custody-schema-") as tmp:
        server = embedded_url(Path(tmp), cleanup_mode="delete")
        engine = owner_engine(server)
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.exec_driver_sql('CREATE DATABASE "custody_schema"')
        engine.dispose()
        url = with_database(server, "custody_schema")
        migrations.upgrade(url)
        return dump(url)


def main(argv: list[str] | None = None) -> int:
    """Write (or with --check, compare) migrations/schema.sql."""
    parser = argparse.ArgumentParser(prog="python -m migrations.snapshot", description=__doc__)
    parser.add_argument("--check", action="store_true",
                        help="exit 1 if migrations/schema.sql differs from a fresh database")
    args = parser.parse_args(argv)
    schema = fresh_schema()
    if args.check:
        same = SCHEMA_SNAPSHOT.exists() and SCHEMA_SNAPSHOT.read_text() == schema
        print("migrations/schema.sql is current" if same else
              "migrations/schema.sql differs from a fresh database: run `make schema`")
        return 0 if same else 1
    SCHEMA_SNAPSHOT.write_text(schema)
    print(f"wrote {SCHEMA_SNAPSHOT} ({schema.count(chr(10))} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
