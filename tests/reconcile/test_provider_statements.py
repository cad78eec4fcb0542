"""Custody provider statements against a real ledger: deposits credited through the provider's
own notifications (a real anvil, the deposit watcher with the provider attestor), then a
statement with each kind of outcome: a matched record, an amount mismatch, a record missing in
the ledger and one of ours missing at the provider; the clearing remainder; a fix booked
through the clearing account; the same file again; a malformed file; a stored reference with
other content."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from api.cases import record_and_alert
from config.uow import UnitOfWork
from deposits import service as deposits
from devtools.anvil import AnvilNode
from ledger import chart
from ledger import service as ledger
from ledger.integrity import verify
from ledger.model import Entry, Line
from reconcile import provider
from reconcile import service as cases
from reconcile.model import Recorded
from reconcile.provider_model import Outcome
from tests.deposits.conftest import ALICE, NOW, SLOTS_IN_AN_EPOCH, Rig, deploy_tokens
from tests.reconcile.conftest import alerts, all_cases

pytestmark = pytest.mark.anvil

HEADER = "provider,reference,direction,asset,amount_minor,occurred_at,chain,tx_hash\n"
AT = "2026-11-29T11:00:00Z"


@dataclass
class Credited:
    """Three USDC deposits credited under the provider ``acme``'s notifications."""

    rig: Rig
    refs: dict[str, str]  # name -> reference (<chain>:<tx_hash>:<position>)
    txs: dict[str, str]


@pytest.fixture
def node() -> Iterator[AnvilNode]:
    """A fresh anvil for one test (automine on)."""
    with AnvilNode.start(slots_in_an_epoch=SLOTS_IN_AN_EPOCH) as n:
        yield n


@pytest.fixture
def credited(engine: Engine, node: AnvilNode) -> Credited:
    """Deposits of 4, 5 and 6 USDC, each credited once acme's ``complete`` notification agreed."""
    tokens = deploy_tokens(node)
    node.set_automine(False)
    rig = Rig(engine=engine, node=node, tokens=tokens, attestor="provider")
    amounts = {"matched": 4_000_000, "mismatch": 5_000_000, "ours_only": 6_000_000}
    addresses = {name: rig.user(f"u-{name}") for name in amounts}
    txs = {name: node.transact(tokens.usdc, "transfer", [addresses[name], amount], ALICE)
           for name, amount in amounts.items()}
    node.mine(3)
    rig.step()
    with UnitOfWork(engine) as uow:
        for name, amount in amounts.items():
            deposits.receive_notification(uow, "acme", {
                "event_id": f"ev-{name}", "chain": "dev", "tx_hash": txs[name],
                "position": "log:0", "status": "complete", "address": addresses[name],
                "asset": "USDC", "amount_minor": str(amount)})
        uow.commit()
    assert rig.step().credited == 3
    return Credited(rig, {name: f"dev:{tx}:log:0" for name, tx in txs.items()}, txs)


def _statement(tmp_path: Path, c: Credited, name: str = "acme-2026-11-29.csv",
               matched_amount: int = 4_000_000) -> Path:
    path = tmp_path / name
    path.write_text(HEADER + "".join([
        f"acme,{c.refs['matched']},in,USDC,{matched_amount},{AT},dev,{c.txs['matched']}\n",
        f"acme,{c.refs['mismatch']},in,USDC,5000001,{AT},dev,{c.txs['mismatch']}\n",
        f"acme,acme-7781,in,USDC,1230000,{AT},dev,\n",
    ]))
    return path


def _run(engine: Engine, path: Path) -> tuple[provider.Imported, provider.ProviderCheck,
                                              Recorded]:
    """Import, check and record the findings as cases, in one unit of work (as the CLI)."""
    with UnitOfWork(engine) as uow:
        imported, check = provider.run(uow, provider.load_statement(path), imported_by="ops",
                                       now=NOW)
        recorded = record_and_alert(uow, "reconcile.provider", check.findings, NOW)
        uow.commit()
    return imported, check, recorded


def _stored(engine: Engine) -> tuple[int, int]:
    with UnitOfWork(engine) as uow:
        return (int(uow.conn.execute(sa.text("SELECT count(*) FROM provider_statements"))
                    .scalar_one()),
                int(uow.conn.execute(sa.text("SELECT count(*) FROM provider_statement_records"))
                    .scalar_one()))


def test_a_statement_with_each_kind_of_mismatch(credited: Credited, tmp_path: Path) -> None:
    c = credited
    imported, check, recorded = _run(c.rig.engine, _statement(tmp_path, c))
    assert (imported.new, imported.records_added, imported.records_known) == (True, 3, 0)
    outcomes = {m.reference: m.outcome for m in check.reconciliation.matches}
    assert outcomes == {c.refs["matched"]: Outcome.MATCHED,
                        c.refs["mismatch"]: Outcome.AMOUNT_MISMATCH,
                        "acme-7781": Outcome.MISSING_IN_LEDGER,
                        c.refs["ours_only"]: Outcome.MISSING_AT_PROVIDER}
    found = {(f.type, f.subject, f.expected, f.observed) for f in check.findings}
    assert found == {
        ("provider_amount_mismatch", f"provider:acme:{c.refs['mismatch']}", "5000000", "5000001"),
        ("provider_missing_in_ledger", "provider:acme:acme-7781", None, "1230000"),
        ("provider_missing_at_provider", f"provider:acme:{c.refs['ours_only']}", "6000000",
         None)}
    (usdc,) = check.reconciliation.remainders
    assert (usdc.asset, usdc.clearing_minor) == ("USDC", 0)
    assert usdc.remainder_minor == 1 + 1_230_000 - 6_000_000
    # Three cases, each with its alert.
    assert len(recorded.opened) == 3 and recorded.updated == []
    opened = all_cases(c.rig.engine)
    assert {(k.type, k.subject, k.expected, k.observed, k.status) for k in opened} == {
        (*f, "open") for f in found}
    assert {a["case_id"] for a in alerts(c.rig.engine)} == {str(k.id) for k in opened}

    # The same file again: nothing stored, nothing opened, the same three cases re-sighted.
    again, recheck, second = _run(c.rig.engine, _statement(tmp_path, c))
    assert (again.new, again.statement_id, again.records_added) == (
        False, imported.statement_id, 0)
    assert recheck.findings == check.findings
    assert second.opened == [] and sorted(second.updated) == sorted(recorded.opened)
    assert [k.seen_count for k in all_cases(c.rig.engine)] == [2, 2, 2]
    assert _stored(c.rig.engine) == (1, 3) and len(alerts(c.rig.engine)) == 3


def test_a_fix_through_clearing_matches_and_stays_in_the_remainder(
        credited: Credited, tmp_path: Path) -> None:
    c = credited
    _, before, _ = _run(c.rig.engine, _statement(tmp_path, c))
    (case,) = [k for k in all_cases(c.rig.engine) if k.type == "provider_missing_in_ledger"]
    # The transfer the provider holds and the ledger lacked, booked into clearing (a fix
    # referencing its case), the case resolved with it: the reference is matched, the money
    # is not attributed yet.
    with UnitOfWork(c.rig.engine) as uow:
        usdc = ledger.get_asset(uow, "USDC")
        custody = ledger.get_account(uow, chart.custody("dev").code, "USDC")
        clearing = ledger.open_account(uow, chart.clearing_provider("acme"), usdc)
        fix = ledger.post(uow, Entry(
            idempotency_key="case-fix:acme-7781", kind="provider_case_fix", effective_at=NOW,
            source="ops", lines=(Line(custody, 1_230_000), Line(clearing, -1_230_000)),
            reference=f"case:{case.id}", reason="held by acme, not booked", metadata={
                "provider": "acme", "provider_reference": "acme-7781"})).transaction_id
        cases.resolve_case(uow, case.id, "ops", "booked into clearing", fix, now=NOW)
        uow.commit()
    with UnitOfWork(c.rig.engine) as uow:
        (after,) = provider.recheck_latest(uow)
        recorded = record_and_alert(uow, "reconcile.provider", after.findings, NOW)
        uow.commit()
    outcomes = {m.reference: m.outcome for m in after.reconciliation.matches}
    assert outcomes["acme-7781"] is Outcome.MATCHED
    assert len(after.findings) == 2
    assert recorded.opened == [] and len(recorded.updated) == 2
    # The clearing account is customer money in custody: custody = customer liabilities.
    assert verify(c.rig.engine).ok
    (usdc_before,) = before.reconciliation.remainders
    (usdc_after,) = after.reconciliation.remainders
    assert (usdc_after.clearing_minor, usdc_after.unbooked_minor) == (1_230_000, 1 - 6_000_000)
    assert usdc_after.remainder_minor == usdc_before.remainder_minor


def test_a_malformed_file_or_a_changed_record_changes_nothing(
        credited: Credited, tmp_path: Path) -> None:
    c = credited
    bad = tmp_path / "bad.csv"
    bad.write_text(HEADER + f"acme,{c.refs['matched']},in,USDC,4.0,{AT},dev,\n")
    with pytest.raises(provider.ProviderStatementInvalid) as raised:
        _run(c.rig.engine, bad)
    assert raised.value.message == (
        "bad.csv: line 2: amount_minor '4.0' is not a whole number of minor units")
    assert _stored(c.rig.engine) == (0, 0) and all_cases(c.rig.engine) == []

    _run(c.rig.engine, _statement(tmp_path, c))
    changed = _statement(tmp_path, c, name="acme-corrected.csv", matched_amount=4_000_002)
    with pytest.raises(provider.ProviderStatementConflict) as conflict:
        _run(c.rig.engine, changed)
    assert c.refs["matched"] in conflict.value.message
    assert _stored(c.rig.engine) == (1, 3) and len(all_cases(c.rig.engine)) == 3
