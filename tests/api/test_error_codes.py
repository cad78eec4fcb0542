"""The table of error codes is complete and true: every code the source can raise or answer
with is in it, nothing else is, and the README, docs/errors.md and the OpenAPI document carry
the same table."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

from api import error_codes
from api.app import create_app
from config.errors import CustodyError

ROOT = Path(__file__).resolve().parents[2]


def _sources() -> list[Path]:
    return [p for package in error_codes.PACKAGES for p in (ROOT / package).rglob("*.py")]


def _is_engine_error(path: Path, name: str) -> bool:
    module = importlib.import_module(".".join(path.relative_to(ROOT).with_suffix("").parts))
    cls = getattr(module, name, None)
    return isinstance(cls, type) and issubclass(cls, CustodyError)


def codes_in_source() -> set[str]:
    """The codes the source defines: ``code = "..."`` in the body of an engine error class
    (a CustodyError: the withdrawals' broken invariants have codes too, but are never answered
    with), and the string literal
    code argument of every ``problem(request, status, "code", ...)`` or
    ``_problem_bytes(scope, status, "code", ...)`` call."""
    found: set[str] = set()
    for path in _sources():
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and _is_engine_error(path, node.name):
                for statement in node.body:
                    if (isinstance(statement, ast.Assign)
                            and any(isinstance(t, ast.Name) and t.id == "code"
                                    for t in statement.targets)
                            and isinstance(statement.value, ast.Constant)):
                        found.add(str(statement.value.value))
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                  and node.func.id in ("problem", "_problem_bytes") and len(node.args) >= 3
                  and isinstance(node.args[2], ast.Constant)):
                found.add(str(node.args[2].value))
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                  and node.func.id == "print_error" and node.args):
                # The CLI's one-line errors: a literal code, or a constant naming one.
                first = node.args[0]
                if isinstance(first, ast.Constant):
                    found.add(str(first.value))
                elif isinstance(first, ast.Name):
                    module = importlib.import_module(
                        ".".join(path.relative_to(ROOT).with_suffix("").parts))
                    value = getattr(module, first.id, None)
                    if isinstance(value, str):
                        found.add(value)
            elif (isinstance(node, ast.Dict) and any(
                    isinstance(v, ast.Constant) and v.value == "method_not_allowed"
                    for v in node.values)):
                # api.problems' mapping of HTTP statuses to codes.
                found.update(str(v.value) for v in node.values if isinstance(v, ast.Constant))
    return found


def test_the_table_lists_exactly_the_codes_the_source_defines() -> None:
    table = {c.code for c in error_codes.catalogue()}
    source = codes_in_source()
    assert source - table == set(), "codes missing from the table"
    assert table - source == set(), "codes in the table that nothing defines"
    assert len(table) > 100


def test_every_code_says_what_it_means() -> None:
    for entry in error_codes.catalogue():
        assert len(entry.meaning) >= 10, entry
        assert all(400 <= s < 600 for s in entry.statuses), entry
        assert bool(entry.statuses) is (entry.code not in error_codes.CLI_CODES), entry


def test_docs_and_readme_carry_the_generated_table() -> None:
    assert (ROOT / "docs" / "errors.md").read_text() == error_codes.errors_document(), \
        "docs/errors.md is stale: run python -m api.error_codes"
    readme = (ROOT / "README.md").read_text()
    assert error_codes.readme_with_table(readme) == readme, \
        "the README's table is stale: run python -m api.error_codes"


def test_openapi_lists_every_code_in_the_problem_schema_and_the_description() -> None:
    doc = create_app(None, None, None).openapi()  # type: ignore[arg-type]
    code = doc["components"]["schemas"]["Problem"]["properties"]["code"]
    assert code["enum"] == error_codes.codes()
    assert error_codes.markdown_table() in doc["info"]["description"]
