"""The HTML report in a real browser: Debian's Chromium driven by Playwright (FIELD-NOTES.md,
"Browsers"), the page opened from a ``file://`` URL as a reader would open it offline.

The browser starts once per module and the main page is loaded once; each test looks at one
property of it. A missing Chromium fails the tests (``make browser`` installs it): a report
that was never seen rendered is not tested.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal, localcontext
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from playwright.sync_api import Browser, Page

from reserves.html import decimal_text, render_report
from reserves.model import AssetReserves

ROOT = "4f" * 8 + "0123456789abcdef" * 3
BLOCK_HASH = "0x" + "ab" * 32
SIGNATURE = "0x" + "5c" * 65
HOSTILE_CHAIN = "<script>window.__pwned = 1</script>"
HOSTILE_ADDRESS = '0x"><img src=x onerror="window.__pwned = 2">'
ETH = 10**18
USDC = 10**6


def _asset(a: AssetReserves) -> dict[str, Any]:
    """An asset of the report JSON, its derived figures from the model."""
    return {"asset": a.asset, "scale": a.scale, "liabilities_users": str(a.liabilities_users),
            "liabilities_other": str(a.liabilities_other), "liabilities": str(a.liabilities),
            "custody": str(a.custody), "treasury": str(a.treasury), "ledger": str(a.ledger),
            "on_chain": str(a.on_chain), "difference": str(a.difference),
            "surplus": str(a.surplus), "ratio": a.ratio, "explained": a.explained}


def _report(report_id: int, assets: list[AssetReserves], chain: str = "ethereum",
            address: str = "0x" + "1a" * 20) -> dict[str, Any]:
    """A report of the ``custody-por-report/1`` shape."""
    return {
        "format": "custody-por-report/1", "id": report_id,
        "taken_at": f"2026-12-0{report_id - 2}T10:00:00.123456+00:00",
        "ledger": {"through_posting_id": "1234", "known_at": "2026-12-07T10:00:00.1+00:00"},
        "chains": [{"chain": chain, "chain_id": 31337, "finality": "finalized",
                    "block_number": 120, "block_hash": BLOCK_HASH}],
        "liabilities": {"root": ROOT, "depth": 10, "users": 1000, "assets": ["ETH", "USDC"],
                        "sums": [str(a.liabilities_users) for a in assets]},
        "assets": [_asset(a) for a in assets],
        "addresses": [
            {"chain": chain, "address": address, "kind": "hot",
             "holdings": [{"asset": "ETH", "token": None, "decimals": 18,
                           "balance": str(1220 * ETH)}],
             "message": "custody proof of reserves: report 7", "signer": "engine",
             "signature": SIGNATURE},
            {"chain": "ethereum", "address": "0x" + "2b" * 20, "kind": "cold",
             "holdings": [{"asset": "USDC", "token": "0x" + "3c" * 20, "decimals": 6,
                           "balance": str(470_000 * USDC)}],
             "message": "custody proof of reserves: report 7", "signer": "external",
             "signature": None},
        ],
    }


def _figures(step: int) -> list[AssetReserves]:
    """ETH covered and USDC below 1 (with a difference nothing explains), growing per step."""
    eth = AssetReserves("ETH", 18, 1200 * ETH + 5 * ETH // 10 - step * ETH, 45 * ETH // 10,
                        1180 * ETH - step * ETH, 40 * ETH, 1220 * ETH - step * ETH)
    usdc = AssetReserves("USDC", 6, 500_000 * USDC + 25 * USDC // 100 - step * USDC, 0,
                         460_000 * USDC, 20_000 * USDC, 470_000 * USDC, explained=False)
    return [eth, usdc]


def _history(reports: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The stored reports' summary, oldest first."""
    return [{"id": r["id"], "taken_at": r["taken_at"],
             "assets": [{"asset": a["asset"], "scale": a["scale"],
                         "liabilities": a["liabilities"], "on_chain": a["on_chain"]}
                        for a in r["assets"]]} for r in reports]


# Five stored reports, #3 to #7; #7 is the current one, with hostile strings in it.
REPORTS = [_report(i, _figures(7 - i)) for i in range(3, 7)] + [
    _report(7, _figures(0), chain=HOSTILE_CHAIN, address=HOSTILE_ADDRESS)]


@dataclass
class Loaded:
    """The page of the current report, and every URL it requested."""

    page: Page
    url: str
    requests: list[str]


def _open(browser: Browser, path: Path, html: str) -> Loaded:
    """``html`` written to ``path`` and opened from its file URL, requests recorded."""
    path.write_text(html, encoding="utf-8")
    page = browser.new_page()
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    page.goto(path.as_uri(), wait_until="load")
    return Loaded(page, path.as_uri(), requests)


@pytest.fixture(scope="module")
def loaded(browser: Browser, tmp_path_factory: pytest.TempPathFactory) -> Loaded:
    """The current report with its history of five, open in the browser."""
    path = tmp_path_factory.mktemp("report") / "report.html"
    return _open(browser, path, render_report(REPORTS[-1], _history(REPORTS)))


def test_page_requests_nothing_but_its_own_file(loaded: Loaded) -> None:
    loaded.page.wait_for_load_state("networkidle")
    assert loaded.requests == [loaded.url]


def test_totals_ratios_and_root_are_visible_text(loaded: Loaded) -> None:
    page = loaded.page
    assert page.locator("#asset-ETH td").all_inner_texts() == [
        "1,200.50", "4.50", "1,205.00", "1,180.00", "40.00", "1,220.00", "0.00", "15.00",
        "1.012448"]
    assert page.locator("#asset-USDC td").all_inner_texts() == [
        "500,000.25", "0.00", "500,000.25", "460,000.00", "20,000.00", "470,000.00",
        "-10,000.00 unexplained", "-30,000.25", "0.939999 below 1"]
    root = page.locator("#liabilities-root")
    assert root.is_visible() and root.inner_text() == ROOT
    assert page.locator("#liabilities-sums").inner_text().split() == [
        "ETH", "1,200.50", "USDC", "500,000.25"]
    assert BLOCK_HASH in page.locator("#chains").inner_text()
    addresses = page.locator("#addresses").inner_text()
    assert SIGNATURE in addresses and "external, not signed" in addresses
    assert "470,000.00 USDC" in addresses


def test_ratio_below_one_is_marked(loaded: Loaded) -> None:
    page = loaded.page
    assert page.locator("#asset-USDC").get_attribute("class") == "below-one"
    assert page.locator("#asset-ETH").get_attribute("class") is None
    badge = page.locator("#asset-USDC .ratio .badge")
    assert badge.is_visible() and badge.inner_text() == "below 1"
    # Marked in colour, not only in words.
    background = badge.evaluate("e => getComputedStyle(e).backgroundColor")
    assert background == "rgb(180, 35, 24)"
    assert page.locator("#card-USDC.below-one").is_visible()


@pytest.mark.parametrize("code", ["ETH", "USDC"])
def test_each_asset_has_a_painted_chart_with_a_point_per_report(loaded: Loaded,
                                                                code: str) -> None:
    chart = loaded.page.locator(f"#chart-{code}")
    box = chart.bounding_box()
    assert box is not None and box["width"] > 300 and box["height"] > 100
    for name in ("reserves", "liabilities"):
        series = chart.locator(f"g.series-{name}")
        assert series.get_attribute("data-points") == str(len(REPORTS))
        assert series.locator("circle").count() == len(REPORTS)
        line = series.locator("polyline")
        line_box = line.bounding_box()
        assert line_box is not None and line_box["width"] > 0
        assert line.evaluate("e => getComputedStyle(e).stroke") != "none"


def test_chart_points_carry_exact_values(loaded: Loaded) -> None:
    last = loaded.page.locator("#chart-USDC g.series-reserves circle").last
    assert last.locator("title").text_content() == (
        "Report #7, 2026-12-05 10:00:00.123456 UTC\nReserves (on-chain): 470,000.00 USDC\n"
        "Liabilities: 500,000.25 USDC\nRatio: 0.939999")
    assert last.get_attribute("class") == "below-one"
    labels = loaded.page.locator("#chart-ETH .y-labels text").all_text_contents()
    assert labels == ["0", "500", "1,000", "1,500"]


def test_hostile_strings_are_shown_as_text_not_executed(loaded: Loaded) -> None:
    page = loaded.page
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.locator("img, #chains script, #addresses script").count() == 0
    assert HOSTILE_CHAIN in page.locator("#chains").inner_text()
    assert HOSTILE_ADDRESS in page.locator("#addresses").inner_text()


def test_a_single_report_draws_one_point_per_series(browser: Browser, tmp_path: Path) -> None:
    report = _report(3, _figures(0))
    opened = _open(browser, tmp_path / "one.html", render_report(report, _history([report])))
    for code in ("ETH", "USDC"):
        for name in ("reserves", "liabilities"):
            point = opened.page.locator(f"#chart-{code} g.series-{name} circle")
            assert point.count() == 1
            box = point.bounding_box()
            assert box is not None and box["width"] > 0
    opened.page.close()


@settings(max_examples=100)
@given(st.integers(-(2**256), 2**256), st.integers(0, 40))
def test_decimal_text_is_exact(minor: int, scale: int) -> None:
    text = decimal_text(str(minor), scale)
    with localcontext(prec=200):
        assert Decimal(text.replace(",", "")).scaleb(scale) == minor
    assert text.partition(".")[2] == ("" if scale == 0 else text[-scale:])
    # Trailing fractional zeros dropped down to two digits: the same value, and the fraction
    # is the full one's without its trailing zeros, padded back to two (at most the scale).
    short = decimal_text(minor, scale, 2)
    with localcontext(prec=200):
        assert Decimal(short.replace(",", "")) == Decimal(text.replace(",", ""))
    full_fraction = text.partition(".")[2]
    assert short.partition(".")[2] == full_fraction.rstrip("0").ljust(min(2, scale), "0")


def test_decimal_text_refuses_what_is_not_minor_units() -> None:
    for bad in ("1.5", "1e3", "", "01", " 1", "<b>1</b>", True):
        with pytest.raises(ValueError):
            decimal_text(bad, 2)
