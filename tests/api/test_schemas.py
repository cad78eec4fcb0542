"""The hand-built JSON of the hot read equals what its pydantic models give."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from api.openapi import YEAR_PATTERN, at_least, at_most
from api.problems import RequestInvalid
from api.schemas import Balance, Balances, amount, balances_json, parse_instant, parse_minor
from ledger.errors import AmountInvalid
from ledger.model import AMOUNT_LIMIT, Asset
from ledger.service import UserBalance

USDC = Asset(1, "USDC", 6)
ETH = Asset(2, "ETH", 18)
BTC = Asset(3, "BTC.X-1", 8)
UNITS = Asset(4, "POINTS", 0)
BIG = AMOUNT_LIMIT - 1  # the largest amount the engine holds (2^127 - 1)


def pydantic_json(user_id: str, as_of: datetime, known_at: datetime | None,
                  rows: list[UserBalance]) -> bytes:
    """The body as the pydantic models render it (the route's former serialization)."""
    return Balances(user_id=user_id, as_of=as_of, known_at=known_at, balances=[
        Balance(asset=b.asset.code, scale=b.asset.scale,
                posted=amount(b.posted_minor, b.asset.scale),
                pending_incoming=amount(b.pending_incoming_minor, b.asset.scale),
                pending_outgoing=amount(b.pending_outgoing_minor, b.asset.scale),
                available=amount(b.available_minor, b.asset.scale),
                projected=amount(b.projected_minor, b.asset.scale),
                version=b.version, as_of=as_of)
        for b in rows]).model_dump_json().encode()


ROWS = [
    UserBalance(asset=BTC, posted_minor=1, pending_incoming_minor=0, pending_outgoing_minor=0,
                available_minor=1, version=1),
    UserBalance(asset=ETH, posted_minor=BIG, pending_incoming_minor=10**38,
                pending_outgoing_minor=BIG, available_minor=0, version=2**40),
    UserBalance(asset=UNITS, posted_minor=-5, pending_incoming_minor=7,
                pending_outgoing_minor=0, available_minor=-5, version=3),
    UserBalance(asset=USDC, posted_minor=150_000_000, pending_incoming_minor=5_000_000,
                pending_outgoing_minor=32_000_000, available_minor=118_000_000, version=4),
]


@pytest.mark.parametrize("as_of", [
    datetime(2026, 11, 30, 0, 57, 31, 525272, tzinfo=UTC),
    datetime(2026, 11, 30, 0, 57, 31, tzinfo=UTC),  # no fraction
    datetime(1970, 1, 1, 0, 0, 0, 500000, tzinfo=UTC),
    datetime(9998, 12, 31, 23, 59, 59, 1, tzinfo=UTC),
])
@pytest.mark.parametrize("known_at", [None, datetime(2020, 2, 29, 12, 0, 0, 10, tzinfo=UTC)])
@pytest.mark.parametrize("rows", [[], ROWS[:1], ROWS], ids=["none", "one", "several"])
def test_balances_json_is_the_models_json(as_of: datetime, known_at: datetime | None,
                                          rows: list[UserBalance]) -> None:
    for user_id in ("usr_0123456789abcdef0123", "a.b-c_D"):
        assert balances_json(user_id, as_of, known_at, rows) == pydantic_json(
            user_id, as_of, known_at, rows)


def test_balances_json_amounts_are_strings() -> None:
    body = balances_json("u1", datetime(2026, 1, 1, tzinfo=UTC), None, ROWS[1:2])
    assert (f'"posted":{{"minor":"{BIG}","decimal":"170141183460469231731.687303715884105727"}}'
            .encode() in body)
    assert b'"available":{"minor":"0","decimal":"0.000000000000000000"}' in body


class TestParseMinor:
    """Minor units in a request go through the one amount parser at scale 0 (422 otherwise)."""

    @pytest.mark.parametrize(("text", "minor"), [("1", 1), ("7", 7), (str(BIG), BIG)])
    def test_digits(self, text: str, minor: int) -> None:
        assert parse_minor(text) == minor

    @pytest.mark.parametrize("text", [str(AMOUNT_LIMIT), "9" * 78, "\u0661\u0662\u0663", "1_0",
                                      " 1", "1\n", "+1", "-0", "1.0", "1e3", "", "0", "007",
                                      "0x10"])
    def test_refused_as_a_422(self, text: str) -> None:
        with pytest.raises(AmountInvalid, match="^withdrawal amount must be"):
            parse_minor(text, what="withdrawal amount")


@pytest.mark.parametrize(("text", "accepted"), [
    ("1970-01-01T00:00:00+01:00", True),  # 1969 in UTC, 1970 as written: the pattern's rule
    ("1970-01-01T00:00:00Z", True),
    ("9998-12-31T23:59:59-05:00", True),
    ("2026-12-01T09:30:00", True),
    ("1969-12-31T23:59:59Z", False),
    ("0444-10-04T09:24:31Z", False),
    ("9999-01-01T00:00:00Z", False),
])
def test_times_are_accepted_as_the_document_pattern_says(text: str, accepted: bool) -> None:
    assert bool(re.match(YEAR_PATTERN, text)) is accepted
    if accepted:
        at = parse_instant(text, what="as_of")
        assert at is not None and at.tzinfo is UTC
    else:
        with pytest.raises(RequestInvalid, match="between 1970 and 9998"):
            parse_instant(text, what="as_of")


@pytest.mark.parametrize("bound", [1, 9, 10, 19, 99, 100, 1000, 1500, 90909, 10**15,
                                   2**127 - 1, 123456789])
def test_range_patterns_match_exactly_the_integers_on_their_side(bound: int) -> None:
    lo, hi = re.compile(at_least(bound)), re.compile(at_most(bound))
    near = {bound + d for d in range(-120, 121)} | {bound * 10, bound // 10, 1, 10**40}
    for n in sorted(x for x in near if x >= 1):
        assert bool(lo.match(str(n))) is (n >= bound), (bound, n)
        assert bool(hi.match(str(n))) is (n <= bound), (bound, n)
    for bad in ("0", "-5", "01", f"0{bound}", f"{bound}.0", ""):
        assert not lo.match(bad) and not hi.match(bad), bad


@pytest.mark.parametrize(("text", "accepted"), [
    ("log:0", True), ("call:0", True), ("call:0.2.1", True), ("call:0.0", True),
    ("call:0.", False), ("call:0..1", False), ("log:0.1", False), ("call:-1", False),
    ("call:0." + ".".join(["1"] * 1024), True), ("call:0." + ".".join(["1"] * 1025), False),
])
def test_positions_include_internal_call_paths(text: str, accepted: bool) -> None:
    from api.schemas import POSITION_PATTERN

    assert bool(re.fullmatch(POSITION_PATTERN, text)) is accepted
