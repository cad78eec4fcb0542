"""The aging check on a real database: an open reserve past the SLA and an unknown withdrawal
older than its threshold (anvil, a dropped send) are each exactly one case about the
withdrawal; later runs update it; before the threshold nothing opens. Time is driven by
``now``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy.engine import Engine

from api.cases import record_check
from config.reconcile import ReconcileConfig, parse_reconcile_config
from config.withdrawals import WithdrawalsConfig
from reconcile import aging
from tests.reconcile.conftest import all_cases
from tests.support.fault_proxy import FaultProxy
from tests.withdrawals.chainkit import start_devnet
from tests.withdrawals.conftest import SetOwnAddresses, fund, open_book, req
from withdrawals import service as withdrawals
from withdrawals.model import State

CFG = ReconcileConfig(reserve_sla_s=7200, unknown_withdrawal_after_s=3600)


def run(engine: Engine, now: datetime) -> list[tuple[str, str, int]]:
    """Run the check at ``now``; every case as (type, subject, seen count)."""
    record_check(engine, aging.CHECK, aging.run(engine, CFG, now=now), now)
    return [(c.type, c.subject, c.seen_count) for c in all_cases(engine)]


def test_an_open_reserve_past_the_sla_is_one_case_about_its_withdrawal(
        wbook: Engine, cfg: WithdrawalsConfig, own: SetOwnAddresses) -> None:
    now = datetime.now(UTC)
    w = withdrawals.request_withdrawal(wbook, cfg, own, req(), now=now).withdrawal
    assert run(wbook, now + timedelta(seconds=7100)) == []
    subject = f"withdrawal:{w.id}"
    assert run(wbook, now + timedelta(seconds=7300)) == [("reserve_overdue", subject, 1)]
    assert run(wbook, now + timedelta(seconds=9000)) == [("reserve_overdue", subject, 2)]
    (case,) = all_cases(wbook)
    assert case.refs["withdrawal_id"] == str(w.id) and case.observed == str(
        w.amount_minor + w.fee_max_minor)
    assert case.evidence["state"] == "reserved" and case.evidence["threshold_s"] == 7200


@pytest.mark.anvil
def test_an_old_unknown_withdrawal_is_one_case_and_its_reserve_not_another(
        engine: Engine) -> None:
    devnet = start_devnet()
    try:
        open_book(engine)
        fund(engine, ["u1"], 150_000_000)
        with FaultProxy(devnet.node.url) as proxy:
            ctx = devnet.context(proxy.url)
            w = withdrawals.request_withdrawal(engine, devnet.cfg, SetOwnAddresses(), req(),
                                               now=devnet.clock).withdrawal
            proxy.fault = "drop_request"
            devnet.step(engine, ctx)
        assert withdrawals.get_withdrawal(engine, w.id).state is State.UNKNOWN
    finally:
        devnet.node.stop()
    since = withdrawals.get_withdrawal(engine, w.id).state_changed_at
    assert run(engine, since + timedelta(seconds=3500)) == []
    # Past the reserve's SLA too (it was recorded at the database's clock): still one case.
    later = max(since, datetime.now(UTC)) + timedelta(hours=3)
    assert run(engine, later) == [("withdrawal_unknown_aged", f"withdrawal:{w.id}", 1)]
    assert run(engine, later + timedelta(hours=1)) == [
        ("withdrawal_unknown_aged", f"withdrawal:{w.id}", 2)]


def test_thresholds_come_from_the_configuration_with_defaults() -> None:
    assert parse_reconcile_config({}) == ReconcileConfig()
    assert parse_reconcile_config({"withdrawals": {"open_item_sla_s": 60}}).reserve_sla_s == 60
    cfg = parse_reconcile_config({"reconcile": {"review_deposit_after_s": 5},
                                  "withdrawals": {"open_item_sla_s": 60}})
    assert (cfg.reserve_sla_s, cfg.review_deposit_after_s, cfg.held_withdrawal_after_s) == (
        60, 5, 3600)
    from config.errors import ConfigurationInvalid

    for bad in ({"reconcile": {"review_deposit_after_s": 0}},
                {"reconcile": {"nope": 1}}, {"reconcile": {"reserve_sla_s": "1"}}):
        with pytest.raises(ConfigurationInvalid):
            parse_reconcile_config(bad)
