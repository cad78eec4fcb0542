"""The layout of the SQL holds: one file per function, the triggers of a table in that table's
file, no code in the revisions; and the state names that SQL uses are the Python enums' values."""

from __future__ import annotations

import re
from enum import StrEnum

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from deposits.model import Booking, DepositEvent, DepositState
from ledger.model import AccountType
from migrations import SQL_DIR, definitions
from withdrawals.model import TERMINAL, State

FUNCTION = re.compile(r"^CREATE (?:OR REPLACE )?FUNCTION (\w+)\(", re.M | re.I)
TRIGGER = re.compile(r"^CREATE (?:CONSTRAINT )?TRIGGER (\w+)", re.M | re.I)
LITERAL = re.compile(r"'(\w+)'")


def functions_by_file() -> dict[str, list[str]]:
    """Definition file -> the functions it defines."""
    return {d.path: FUNCTION.findall(d.sql) for d in definitions.definitions()}


class TestLayout:
    def test_each_function_is_defined_in_one_file(self) -> None:
        seen: dict[str, str] = {}
        for path, names in functions_by_file().items():
            for name in names:
                assert name not in seen, f"{name} is defined in {seen[name]} and {path}"
                seen[name] = path
            if path.startswith("functions/"):
                assert names == [path.removeprefix("functions/").removesuffix(".sql")]
        assert len(seen) > 25

    def test_revisions_hold_no_functions_triggers_or_views(self) -> None:
        for file in sorted((SQL_DIR / "revisions").glob("*.sql")):
            text = file.read_text()
            assert not FUNCTION.search(text), file.name
            assert not TRIGGER.search(text), file.name
            assert not re.search(r"^CREATE (OR REPLACE )?VIEW", text, re.M | re.I), file.name

    def test_the_database_has_exactly_the_defined_functions(self, owner: Engine) -> None:
        defined = {n for names in functions_by_file().values() for n in names}
        with owner.connect() as conn:
            present = set(conn.execute(sa.text(
                "SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
                "WHERE n.nspname = 'public'")).scalars())
        assert present == defined

    def test_each_table_has_its_triggers_in_its_own_file(self, owner: Engine) -> None:
        in_files = {(d.path.removeprefix("triggers/").removesuffix(".sql"), name)
                    for d in definitions.definitions() if d.path.startswith("triggers/")
                    for name in TRIGGER.findall(d.sql)}
        with owner.connect() as conn:
            present = {(r.table, r.name) for r in conn.execute(sa.text(
                "SELECT c.relname AS table, t.tgname AS name FROM pg_trigger t "
                "JOIN pg_class c ON c.oid = t.tgrelid WHERE NOT t.tgisinternal"))}
        assert present == in_files


def check_values(owner: Engine, table: str, column: str) -> set[str]:
    """The values a CHECK constraint on exactly ``table.column`` allows."""
    with owner.connect() as conn:
        defs = conn.execute(sa.text(
            "SELECT pg_get_constraintdef(k.oid) FROM pg_constraint k "
            "JOIN pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = ANY (k.conkey) "
            "WHERE k.contype = 'c' AND k.conrelid = CAST(:t AS regclass) AND a.attname = :c "
            "AND cardinality(k.conkey) = 1"), {"t": table, "c": column}).scalars().all()
    assert len(defs) == 1, (table, column, defs)
    return set(LITERAL.findall(defs[0]))


@pytest.mark.parametrize(
    "table, column, enum",
    [
        ("deposits", "state", DepositState),
        ("deposits", "booking", Booking),
        ("deposit_events", "state", DepositState),
        ("deposit_events", "event", DepositEvent),
        ("withdrawals", "state", State),
        ("accounts", "type", AccountType),
    ],
)
def test_check_constraints_allow_exactly_the_enum(
    owner: Engine, table: str, column: str, enum: type[StrEnum]
) -> None:
    assert check_values(owner, table, column) == {member.value for member in enum}


def test_the_open_withdrawals_index_leaves_out_exactly_the_terminal_states(owner: Engine) -> None:
    with owner.connect() as conn:
        definition = conn.execute(sa.text(
            "SELECT pg_get_indexdef(CAST('withdrawals_state_idx' AS regclass))")).scalar_one()
    assert set(LITERAL.findall(definition.split("WHERE", 1)[1])) == {s.value for s in TERMINAL}


# The comparisons of a state or event column with literals in the definition files: each literal
# must be a value of the enum the column holds. (column name pattern, enum, files it applies to)
STATE_USES = [
    (r"(?:to_state|from_state|w\.state|p_state)", State, "withdrawal"),
    # The outbox trigger reads the new history rows as ``n`` (its transition table).
    (r"\bn\.state", DepositState, "deposit_events"),
    (r"\bn\.event", DepositEvent, "deposit_events"),
]
COMPARISON = r"{col}\s*(?:=|<>|(?:NOT\s+)?IN\s*\()\s*((?:'\w+'\s*,?\s*)+)"


def test_state_names_in_the_definitions_are_enum_values() -> None:
    checked = 0
    for d in definitions.definitions():
        for column, enum, where in STATE_USES:
            if where not in d.path:
                continue
            for match in re.finditer(COMPARISON.format(col=column), d.sql, re.I):
                for literal in LITERAL.findall(match.group(1)):
                    assert literal in {m.value for m in enum}, (d.path, match.group(0))
                    checked += 1
    # The withdrawal type list (10), the reserve's states (3), the states the daily total leaves
    # out (5), the deposit events (3) and states (3) that become webhooks.
    assert checked >= 24


def test_the_open_cold_transfers_index_leaves_out_exactly_the_terminal_states(
        owner: Engine) -> None:
    from sweeps.model import TERMINAL as MOVEMENT_TERMINAL

    with owner.connect() as conn:
        definition = conn.execute(sa.text(
            "SELECT pg_get_indexdef(CAST('cold_transfers_one_open' AS regclass))")).scalar_one()
    assert definition.startswith("CREATE UNIQUE INDEX")
    assert set(LITERAL.findall(definition.split("WHERE", 1)[1])) == {
        s.value for s in MOVEMENT_TERMINAL}
