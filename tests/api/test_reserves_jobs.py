"""The ``reserves.report`` job and what it signals: it takes a report over every configured
chain, its findings become cases with their alerts (holdings below liabilities here: no chain
holds anything), seen again they are re-sighted, not opened twice; ``/metrics`` gives the newest
report's ratio per asset, the below-liabilities flag and the report's age."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import cast

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from api import metrics
from api.jobs import Intervals, build_jobs
from config.chains import parse_chains_config
from config.uow import UnitOfWork
from reconcile.model import CaseType, Recorded
from tests.api.test_metrics import scrape, value
from tests.reconcile.conftest import alerts, all_cases
from tests.withdrawals.conftest import fund, open_book

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
NO_CHAINS = parse_chains_config({"assets": {"USDC": {"scale": 6}, "ETH": {"scale": 18}}})


def test_the_job_takes_a_report_opens_its_cases_and_the_metrics_show_it(
        engine: Engine) -> None:
    open_book(engine, float_minor=0)
    fund(engine, ["u1", "u2"], 5_000_000)
    with UnitOfWork(engine) as uow:
        before = metrics.render(NO_CHAINS, None, uow, NOW, None).decode()
    assert value(scrape(before), "custody_reserves_report_age_seconds") is None  # No report.
    (job,) = build_jobs(engine, NO_CHAINS, None, only=["reserves"])
    assert job.name == "reserves.report" and job.interval_s == Intervals().reserves_s
    assert Intervals.uniform(0.1).reserves_s == Intervals().reserves_s
    report_id, recorded = cast(tuple[int | None, Recorded], job.step(NOW))
    assert report_id is not None and len(recorded.opened) == 2
    short, unexplained = all_cases(engine)
    assert (short.type, short.subject, short.opened_by, short.expected, short.observed) == (
        CaseType.RESERVES_SHORTFALL, "reserves:USDC", "reserves.report", "10000000", "0")
    # No chain holds what custody says: a difference no movement explains.
    assert (unexplained.type, unexplained.subject, unexplained.expected) == (
        CaseType.RESERVES_DIFFERENCE_UNEXPLAINED, "reserves:USDC:difference", "10000000")
    assert [a["type"] for a in alerts(engine)] == ["reserves_shortfall",
                                                   "reserves_difference_unexplained"]
    assert all("custody cases resolve" in a["next"] for a in alerts(engine))
    again_id, again = cast(tuple[int | None, Recorded], job.step(NOW + timedelta(seconds=30)))
    assert report_id is not None and again_id == report_id + 1 and again.opened == []
    assert again.updated == [short.id, unexplained.id]
    with UnitOfWork(engine) as uow:
        text = metrics.render(NO_CHAINS, None, uow, NOW + timedelta(seconds=90), None).decode()
        reports = uow.conn.execute(sa.text("SELECT count(*) FROM reserve_reports")).scalar()
    families = scrape(text)
    assert reports == 2
    assert value(families, "custody_reserves_ratio", asset="USDC") == 0.0
    assert value(families, "custody_reserves_ratio", asset="ETH") is None  # Nothing owed.
    assert value(families, "custody_reserves_below_liabilities", asset="USDC") == 1.0
    assert value(families, "custody_reserves_below_liabilities", asset="ETH") == 0.0
    assert value(families, "custody_reserves_report_age_seconds") == 60.0
