"""Proof of reserves against a real PostgreSQL with no chain configured (the ledger side alone):
the report's liabilities are exactly the postings up to its watermark while posts go on from
other connections, a post in flight is waited for, a negative balance is refused with a case
and nothing published, the stored tree gives every user's proof of a 1,000-user report (through
a chunk of stored leaves and the stored upper nodes), and the standalone verifier, the engine's
verifier and ``custody reserves verify`` agree on every one of them."""

from __future__ import annotations

import importlib.util
import json
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import sqlalchemy as sa
import typer
from click.testing import CliRunner
from sqlalchemy.engine import Engine

from api.cases import record_check
from api.cli import app
from config.chains import ChainsConfig, parse_chains_config
from config.uow import UnitOfWork
from ledger import chart
from ledger import service as ledger
from ledger.model import Entry, credit, debit
from reconcile.model import CaseType
from reserves import merkle, service
from reserves.errors import ReportInconsistent, ReportNotFound
from tests.conftest import BOTH_ROUTES
from tests.reconcile.conftest import alerts, all_cases
from tests.withdrawals.conftest import CHAIN, fund, open_book

ROOT = Path(__file__).resolve().parents[2]
NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
NO_CHAINS: ChainsConfig = parse_chains_config({"assets": {"USDC": {"scale": 6},
                                                          "ETH": {"scale": 18}}})


def _take(engine: Engine, now: datetime = NOW) -> service.Taken:
    return service.take_report(engine, NO_CHAINS, now=now, taken_by="test",
                               signer_of=lambda chain, address, index: None)


def _replayed(engine: Engine, through: int) -> dict[tuple[str, str], int]:
    """Each user's posted balance per asset from the postings with id <= ``through`` alone
    (the user id cut from the account code in Python, not as the service's SQL does)."""
    found: dict[tuple[str, str], int] = {}
    with UnitOfWork(engine) as uow:
        rows = uow.conn.execute(sa.text(
            "SELECT a.code, s.code AS asset, sum(-p.amount) AS v "
            "FROM ledger_postings p JOIN accounts a ON a.id = p.account_id "
            "JOIN assets s ON s.id = a.asset_id WHERE p.id <= :t AND a.code LIKE 'user:%' "
            "GROUP BY 1, 2"), {"t": through})
        for r in rows:
            user = r.code[len("user:"):r.code.rindex(":")]
            found[(user, r.asset)] = found.get((user, r.asset), 0) + int(r.v)
    return found


def _leaves(engine: Engine, report_id: int) -> dict[tuple[str, str], int]:
    with UnitOfWork(engine) as uow:
        doc = service.report_document(uow, report_id)
        assets = doc["liabilities"]["assets"]
        rows = uow.conn.execute(sa.text(
            "SELECT user_id, CAST(balances AS text[]) AS b FROM reserve_leaves "
            "WHERE report_id = :r"), {"r": report_id})
        return {(r.user_id, a): int(v) for r in rows for a, v in zip(assets, r.b, strict=True)
                if int(v)}


@BOTH_ROUTES
def test_liabilities_are_the_postings_up_to_the_watermark_while_posts_go_on(
        engine: Engine) -> None:
    open_book(engine)
    users = [f"u{i}" for i in range(20)]
    fund(engine, users, 1_000_000)
    stop = threading.Event()
    posted = [0]

    def keep_posting() -> None:
        n = 0
        while not stop.is_set():
            n += 1
            fund(engine, [users[n % len(users)]], 1_000 + n)
            posted[0] = n

    writers = [threading.Thread(target=keep_posting) for _ in range(2)]
    for w in writers:
        w.start()
    try:
        reports = []
        for i in range(3):
            time.sleep(0.2)
            taken = _take(engine, NOW + timedelta(seconds=i))
            assert taken.report_id is not None
            reports.append(taken.report_id)
    finally:
        stop.set()
        for w in writers:
            w.join()
    assert posted[0] > 3  # Posts really went on during the reports.
    seen = set()
    for report_id in reports:
        with UnitOfWork(engine) as uow:
            doc = service.report_document(uow, report_id)
        through = int(doc["ledger"]["through_posting_id"])
        seen.add(through)
        expected = {k: v for k, v in _replayed(engine, through).items() if v}
        assert _leaves(engine, report_id) == expected
        usdc = {a["asset"]: a for a in doc["assets"]}["USDC"]
        assert int(usdc["liabilities_users"]) == sum(expected.values())
    assert len(seen) == 3  # Each report at its own watermark.


def test_a_post_in_flight_is_waited_for_and_counted(engine: Engine) -> None:
    open_book(engine)
    fund(engine, ["u1"], 5_000_000)
    result: list[service.Taken] = []
    with UnitOfWork(engine) as uow:
        # A post holds the ledger's write gate shared until it commits.
        custody = ledger.get_account(uow, f"custody:{CHAIN}", "USDC")
        wallet = ledger.get_account(uow, "user:u1:wallet", "USDC")
        ledger.post(uow, Entry("in-flight", "deposit", NOW, "tests",
                               (debit(custody, 7), credit(wallet, 7))))
        taker = threading.Thread(target=lambda: result.append(_take(engine)))
        taker.start()
        time.sleep(0.5)
        assert taker.is_alive() and not result  # The report waits for the post to commit...
        uow.commit()
    taker.join(timeout=30)
    (taken,) = result
    assert taken.report_id is not None
    assert _leaves(engine, taken.report_id) == {("u1", "USDC"): 5_000_007}  # ...and counts it.


def test_a_negative_balance_is_refused_with_a_case_and_nothing_is_published(
        engine: Engine, owner: Engine) -> None:
    open_book(engine)
    fund(engine, ["u1", "u2"], 3_000_000)
    with owner.begin() as conn:
        # What no writer can do (the wallet's flag): a superuser, triggers off.
        conn.execute(sa.text("SET LOCAL session_replication_role = replica"))
        conn.execute(sa.text(
            "UPDATE account_balances SET balance = 9, debits_must_not_exceed_credits = false "
            "WHERE account_id = "
            "(SELECT id FROM accounts WHERE code = 'user:u2:wallet')"))
    taken = _take(engine)
    assert taken.report_id is None
    (finding,) = taken.findings
    assert (finding.type, finding.subject, finding.observed) == (
        CaseType.RESERVES_NEGATIVE_BALANCE, "reserves:user:u2:USDC", "-9")
    record_check(engine, "reserves", taken.findings, NOW)
    (case,) = [c for c in all_cases(engine) if c.type == CaseType.RESERVES_NEGATIVE_BALANCE]
    assert case.refs == {"user_id": "u2", "asset": "USDC"}
    assert [a["type"] for a in alerts(engine)] == ["reserves_negative_balance"]
    with UnitOfWork(engine) as uow:
        assert uow.conn.execute(sa.text("SELECT count(*) FROM reserve_reports")).scalar() == 0
        with pytest.raises(ReportNotFound):
            service.report_document(uow)


def _standalone() -> ModuleType:
    spec = importlib.util.spec_from_file_location("verify_proof", ROOT / "docs/verify_proof.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _tampered(proof: dict[str, Any]) -> list[dict[str, Any]]:
    leaf = proof["leaf"]
    first = proof["path"][0]
    return [
        {**proof, "leaf": {**leaf, "balances": [str(int(leaf["balances"][0]) + 1),
                                                *leaf["balances"][1:]]}},
        {**proof, "leaf": {**leaf, "balances": ["-1", *leaf["balances"][1:]]}},
        {**proof, "path": [{**first, "sums": [str(int(first["sums"][0]) + 1),
                                              *first["sums"][1:]]}, *proof["path"][1:]]},
        {**proof, "path": [{**first, "hash": "0" * 64}, *proof["path"][1:]]},
        {**proof, "leaf": {**leaf, "salt": "ab" * 32}},
    ]


def test_a_1000_user_report_every_proof_and_three_verifiers_agree(
        engine: Engine, tmp_path: Path) -> None:
    open_book(engine, float_minor=0)
    users = [f"user-{i:04d}" for i in range(1000)]
    with UnitOfWork(engine) as uow:
        usdc, eth = ledger.get_asset(uow, "USDC"), ledger.get_asset(uow, "ETH")
        cust = {a.code: ledger.get_account(uow, f"custody:{CHAIN}", a.code) for a in (usdc, eth)}
        for i, user in enumerate(users):
            for asset, amount in ((usdc, 1_000 + i), (eth, (i % 7) * 10**15)):
                wallet, _ = ledger.open_user_accounts(uow, user, asset)
                if amount:
                    ledger.post(uow, Entry(f"d:{user}:{asset.code}", "deposit", NOW, "tests",
                                           (debit(cust[asset.code], amount),
                                            credit(wallet, amount))))
        uow.commit()
    taken = _take(engine)
    assert taken.report_id is not None
    with UnitOfWork(engine) as uow:
        doc = service.report_document(uow, taken.report_id)
        proofs = [service.user_proof(uow, u) for u in users]
    root = doc["liabilities"]["root"]
    assert doc["liabilities"]["depth"] == 10 > merkle.CHUNK_LEVEL  # Chunks and upper nodes.
    standalone = _standalone()
    runner = CliRunner()
    # Built once (typer builds it again on every invoke); typer's click is a vendored copy,
    # which click's runner drives as any command.
    cli: Any = typer.main.get_command(app)
    path = tmp_path / "proof.json"
    totals = None
    for user, proof in zip(users, proofs, strict=True):
        ours = merkle.verify(proof, root)
        theirs = standalone.verify(proof, root)
        assert ours.user_id == user == theirs["user_id"]
        assert {a: str(v) for a, v in ours.balances.items()} == {
            a: str(v) for a, v in theirs["balances"].items()}
        assert ours.balances == {"ETH": ((users.index(user)) % 7) * 10**15,
                                 "USDC": 1_000 + users.index(user)}
        totals = totals or ours.totals
        assert ours.totals == totals
        path.write_text(json.dumps(proof))
        result = runner.invoke(cli, ["reserves", "verify", str(path), root])
        assert result.exit_code == 0 and f"valid: user {user}" in result.output
    assert totals == {"ETH": sum((i % 7) * 10**15 for i in range(1000)),
                      "USDC": sum(1_000 + i for i in range(1000))}
    for proof in proofs[:: 97]:
        for bad in _tampered(proof):
            with pytest.raises(merkle.ProofInvalid) as ours_error:
                merkle.verify(bad, root)
            with pytest.raises(standalone.Invalid) as theirs_error:
                standalone.verify(bad, root)
            assert ours_error.value.reason == theirs_error.value.reason
            path.write_text(json.dumps(bad))
            result = runner.invoke(cli, ["reserves", "verify", str(path), root])
            assert result.exit_code == 1
            assert result.output.startswith(f"invalid [{ours_error.value.reason}]: ")
            assert result.output.count("\n") == 1


def test_company_users_and_claims_are_not_users_and_never_lower_what_is_owed(
        engine: Engine) -> None:
    open_book(engine)
    # A real user named "company" and the company's refund user "company:refunds".
    fund(engine, ["company", "company:refunds"], 4_000_000)
    fund(engine, ["u1"], 1_000_000)
    with UnitOfWork(engine) as uow:
        usdc = ledger.get_asset(uow, "USDC")
        clearing = ledger.open_account(uow, chart.clearing_provider("acme"), usdc)
        suspense = ledger.get_account(uow, chart.SUSPENSE_UNATTRIBUTED, "USDC")
        # A claim on the provider (debit balance) and 5 USDC owed in suspense.
        ledger.post(uow, Entry("claim", "adjustment", NOW, "tests",
                               (debit(clearing, 5_000_000), credit(suspense, 5_000_000))))
        uow.commit()
    taken = _take(engine)
    assert taken.report_id is not None
    assert _leaves(engine, taken.report_id) == {("company", "USDC"): 4_000_000,
                                                ("u1", "USDC"): 1_000_000}
    with UnitOfWork(engine) as uow:
        doc = service.report_document(uow, taken.report_id)
        assert merkle.verify(service.user_proof(uow, "company"), doc["liabilities"]["root"]
                             ).balances["USDC"] == 4_000_000
    usdc_figures = {a["asset"]: a for a in doc["assets"]}["USDC"]
    # Refunds owed (4) and suspense (5); the claim on the provider is not netted.
    assert usdc_figures["liabilities_other"] == "9000000"
    assert usdc_figures["liabilities"] == "14000000"
    # No chain holds the custody the ledger has: the difference is unexplained.
    assert usdc_figures["explained"] is False
    assert {f.type for f in taken.findings} == {CaseType.RESERVES_SHORTFALL,
                                                CaseType.RESERVES_DIFFERENCE_UNEXPLAINED}


def test_a_stored_leaf_changed_after_publication_gives_no_proof_in_its_chunk(
        engine: Engine, owner: Engine) -> None:
    open_book(engine)
    fund(engine, ["u1", "u2"], 2_000_000)
    taken = _take(engine)
    with owner.begin() as conn:
        conn.execute(sa.text("SET LOCAL session_replication_role = replica"))
        conn.execute(sa.text("UPDATE reserve_leaves SET balances = ARRAY[0, 1]::numeric[] "
                             "WHERE user_id = 'u2'"))
    with UnitOfWork(engine) as uow:
        # u2's leaf is changed, and u1's proof carries it as its sibling: neither is given.
        for user in ("u1", "u2"):
            with pytest.raises(ReportInconsistent):
                service.user_proof(uow, user)
        # The tables refuse a negative leaf even from their owner.
        with pytest.raises(sa.exc.DBAPIError):
            uow.conn.execute(sa.text(
                "INSERT INTO reserve_nodes VALUES (:r, 9, 0, sha256('x'), ARRAY[-1])"),
                {"r": taken.report_id})
