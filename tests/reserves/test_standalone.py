"""docs/verify_proof.py, the verifier that needs only Python's standard library, against the
engine's (reserves.merkle.verify): the same answer on every proof of a 1,000-user tree, on a set
of tampered proofs and on random changes to a proof's JSON; and its command line, run without
site-packages (``python -I -S``), with the exit codes and the one-line errors it promises."""

from __future__ import annotations

import ast
import copy
import hashlib
import importlib.util
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reserves import merkle
from reserves.merkle import VALUE_LIMIT, Leaf, ProofInvalid

SCRIPT = Path(__file__).resolve().parents[2] / "docs" / "verify_proof.py"
ASSETS = ("BTC", "ETH", "USDC")


def _load() -> Any:
    spec = importlib.util.spec_from_file_location("verify_proof", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


standalone = _load()
Outcome = tuple[Any, ...]


def _engine(doc: Any, root: str) -> Outcome:
    try:
        v = merkle.verify(doc, root)
    except ProofInvalid as e:
        return ("invalid", e.reason)
    return ("valid", v.user_id, v.balances, v.totals, v.root_hash)


def _standalone(doc: Any, root: str) -> Outcome:
    try:
        v = standalone.verify(doc, root)
    except standalone.Invalid as e:
        return ("invalid", e.reason)
    return ("valid", v["user_id"], v["balances"], v["totals"], v["root"])


@pytest.fixture(scope="module")
def tree() -> merkle.Tree:
    """1,000 users in three assets, some balances zero, some near the top of the range."""
    leaves = [Leaf(f"user-{i}", hashlib.sha256(b"%d" % i).digest(),
                   ((i * 104729) % 10**20, 0 if i % 3 else i * 10**18, 2**100 + i))
              for i in range(1000)]
    return merkle.build(leaves, ASSETS)


def test_the_verifier_imports_only_the_standard_library() -> None:
    imported = set()
    for node in ast.walk(ast.parse(SCRIPT.read_text())):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add((node.module or "").split(".")[0])
    assert imported and imported <= sys.stdlib_module_names | {"__future__"}


def test_both_verifiers_accept_every_proof_of_1000_users_alike(tree: merkle.Tree) -> None:
    root = tree.root.hash.hex()
    for index, leaf in enumerate(tree.leaves):
        doc = merkle.proof(tree, index).to_json(report_id=1, scales={"BTC": 8})
        outcome = _engine(doc, root)
        assert outcome == _standalone(doc, root)
        assert outcome == ("valid", leaf.user_id, dict(zip(ASSETS, leaf.balances, strict=True)),
                           dict(zip(ASSETS, tree.root.sums, strict=True)), root)


def _set(*path: Any, to: Any) -> Callable[[dict[str, Any]], None]:
    def change(doc: dict[str, Any]) -> None:
        target: Any = doc
        for key in path[:-1]:
            target = target[key]
        if to is _DELETE:
            del target[path[-1]]
        else:
            target[path[-1]] = to
    return change


_DELETE = object()
#: Tampered proofs of the 1,000-user tree (leaf 0), each with the reason both must give.
TAMPERED: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "format": (_set("format", to="custody-por-proof/2"), "malformed"),
    "assets unsorted": (_set("assets", to=["ETH", "BTC", "USDC"]), "malformed"),
    "asset twice": (_set("assets", to=["BTC", "BTC", "USDC"]), "malformed"),
    "asset lower case": (_set("assets", 0, to="btc"), "malformed"),
    "no leaf": (_set("leaf", to=_DELETE), "malformed"),
    "path not a list": (_set("path", to={}), "malformed"),
    "path of 41": (_set("path", to=[{}] * 41), "malformed"),
    "index true": (_set("leaf", "index", to=True), "malformed"),
    "index a string": (_set("leaf", "index", to="0"), "malformed"),
    "index too large": (_set("leaf", "index", to=1024), "malformed"),
    "index negative": (_set("leaf", "index", to=-1), "malformed"),
    "index changed": (_set("leaf", "index", to=1), "root_mismatch"),
    "user id a number": (_set("leaf", "user_id", to=7), "malformed"),
    "user id with a space": (_set("leaf", "user_id", to="user 0"), "malformed"),
    "user id with a newline": (_set("leaf", "user_id", to="user-0\n"), "malformed"),
    "user id of another": (_set("leaf", "user_id", to="user-1"), "root_mismatch"),
    "salt upper case": (_set("leaf", "salt", to="AB" * 32), "malformed"),
    "salt short": (_set("leaf", "salt", to="ab" * 31), "malformed"),
    "salt changed": (_set("leaf", "salt", to="ab" * 32), "root_mismatch"),
    "two balances": (_set("leaf", "balances", to=["0", "0"]), "malformed"),
    "balance a number": (_set("leaf", "balances", 0, to=0), "malformed"),
    "balance with a leading zero": (_set("leaf", "balances", 0, to="00"), "malformed"),
    "balance with a newline": (_set("leaf", "balances", 0, to="0\n"), "malformed"),
    "balance of 101 digits": (_set("leaf", "balances", 0, to="1" * 101), "malformed"),
    "balance negative": (_set("leaf", "balances", 1, to="-1"), "negative_value"),
    "balance 2**128": (_set("leaf", "balances", 2, to=str(VALUE_LIMIT)), "value_overflow"),
    "balance changed": (_set("leaf", "balances", 1, to="1"), "root_mismatch"),
    "sibling not an object": (_set("path", 3, to=[]), "malformed"),
    "sibling hash missing": (_set("path", 3, "hash", to=_DELETE), "malformed"),
    "sibling hash changed": (_set("path", 3, "hash", to="00" * 32), "root_mismatch"),
    "sibling sum negative": (_set("path", 9, "sums", 0, to="-5"), "negative_value"),
    "sibling sum 2**128": (_set("path", 9, "sums", 0, to=str(VALUE_LIMIT)), "value_overflow"),
    "sibling sum overflowing": (_set("path", 9, "sums", 2, to=str(VALUE_LIMIT - 2**100)),
                                "sum_overflow"),
    "sibling sum changed": (_set("path", 0, "sums", 0, to="1"), "root_mismatch"),
    "no root": (_set("root", to=_DELETE), "malformed"),
    "root sum negative": (_set("root", "sums", 0, to="-1"), "negative_value"),
    "root sums changed": (_set("root", "sums", 0, to="1"), "sums_mismatch"),
    "root hash changed": (_set("root", "hash", to="00" * 32), "sums_mismatch"),
}


@pytest.mark.parametrize("name", list(TAMPERED))
def test_both_verifiers_reject_a_tampered_proof_alike(tree: merkle.Tree, name: str) -> None:
    change, reason = TAMPERED[name]
    doc = merkle.proof(tree, 0).to_json()
    change(doc)
    root = tree.root.hash.hex()
    assert _engine(doc, root) == _standalone(doc, root) == ("invalid", reason)


@pytest.mark.parametrize(("root", "reason"), [("00" * 32, "root_mismatch"),
                                              ("0x" + "00" * 32, "malformed")])
def test_both_verifiers_check_the_published_root_alike(tree: merkle.Tree, root: str,
                                                       reason: str) -> None:
    doc = merkle.proof(tree, 5).to_json()
    assert _engine(doc, root) == _standalone(doc, root) == ("invalid", reason)
    upper = f" {tree.root.hash.hex().upper()}\n"
    assert _engine(doc, upper) == _standalone(doc, upper) == _engine(doc, tree.root.hash.hex())


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found += _paths(item, (*prefix, i))
    return found


JSON_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**130), 2**130), st.floats(allow_nan=False),
    st.sampled_from(["", "0", "-0", "01", "-1", str(VALUE_LIMIT - 1), str(VALUE_LIMIT),
                     "ab" * 32, "AB" * 32, "user-1", "ETH"]),
    st.text(max_size=8), st.lists(st.sampled_from(["0", "1", "ETH"]), max_size=3),
    st.dictionaries(st.sampled_from(["hash", "sums"]), st.just("0"), max_size=2))


#: Five users whose second column sums near the top of the range (2**127 and more).
SMALL = merkle.build([Leaf(f"u{i}", bytes([i]) * 32, (i, 2**125 - i)) for i in range(5)],
                     ("ETH", "USDC"))


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_both_verifiers_agree_on_random_changes(data: st.DataObject) -> None:
    doc = merkle.proof(SMALL, data.draw(st.integers(0, 4))).to_json()
    path = data.draw(st.sampled_from(_paths(doc)))
    _set(*path, to=data.draw(st.one_of(JSON_VALUES, st.just(_DELETE))))(doc)
    root = SMALL.root.hash.hex()
    assert _engine(copy.deepcopy(doc), root) == _standalone(doc, root)


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-I", "-S", str(SCRIPT), *args],
                          capture_output=True, text=True, timeout=30, check=False)


class TestCommandLine:
    def test_a_valid_proof_exits_0_with_a_summary(self, tree: merkle.Tree,
                                                  tmp_path: Path) -> None:
        proof = tmp_path / "proof.json"
        proof.write_text(json.dumps(merkle.proof(tree, 7).to_json()))
        done = _run(str(proof), tree.root.hash.hex())
        leaf = tree.leaves[7]
        assert (done.returncode, done.stderr) == (0, "")
        assert leaf.user_id in done.stdout and tree.root.hash.hex() in done.stdout
        for balance, total in zip(leaf.balances, tree.root.sums, strict=True):
            assert f" {balance} " in done.stdout and str(total) in done.stdout

    def test_an_invalid_proof_exits_1_with_one_line(self, tree: merkle.Tree,
                                                    tmp_path: Path) -> None:
        doc = merkle.proof(tree, 7).to_json()
        doc["path"][2]["sums"][1] = "-3"
        (tmp_path / "bad.json").write_text(json.dumps(doc))
        (tmp_path / "text.json").write_text("not json")
        for name, reason in [("bad.json", "negative_value"), ("text.json", "malformed")]:
            done = _run(str(tmp_path / name), tree.root.hash.hex())
            assert (done.returncode, done.stderr) == (1, "")
            assert done.stdout.startswith(f"invalid [{reason}]: ")
            assert done.stdout.count("\n") == 1 and done.stdout.endswith("\n")

    def test_usage_errors_exit_2_with_one_line(self, tree: merkle.Tree,
                                               tmp_path: Path) -> None:
        for args in [(str(tmp_path / "missing.json"), tree.root.hash.hex()),
                     (str(tmp_path),  tree.root.hash.hex()),
                     (str(tmp_path / "missing.json"), "not-a-root"), ("only-one-argument",)]:
            done = _run(*args)
            assert (done.returncode, done.stdout) == (2, "")
            assert done.stderr.count("\n") == 1 and done.stderr.endswith("\n")
