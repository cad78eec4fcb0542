"""The proof-of-reserves report as one self-contained HTML document, for people to look at.

:func:`render_report` takes a report's JSON (the ``custody-por-report/1`` document) and the
history of stored reports (oldest first, the current one included) and returns one HTML file
that opens offline: inline CSS, inline SVG charts, no script, no font, no image and no URL of
any kind, so that it can be mailed, archived or opened on an air-gapped machine and still show
everything.

Design choices:

- **Exact amounts.** Every amount arrives as a decimal string of minor units; it is turned
  into a decimal of the asset's scale by string operations alone (:func:`decimal_text`), never
  through a float. Only the charts' pixel positions use floats (drawing, not money); their axis
  labels and hover texts are exact decimals again.
- **Nothing injected.** Every string from the report (chain names, addresses, asset codes,
  signers, messages) passes through :func:`html.escape` where it is placed, attributes
  included, so a hostile string is shown as text and never becomes markup.
- **Plain functions, no template engine.** Each section of the page is a small function that
  returns its markup; the page is their concatenation.
- **Stable hooks for tests and readers**: ``id="reserves-table"`` with one ``tr`` per asset
  (``id="asset-<code>"``, class ``below-one`` when the holdings cover less than what is owed),
  ``id="liabilities-root"``, ``id="addresses"``, and per asset ``id="chart-<code>"``, an SVG
  whose two series are ``g.series-reserves`` and ``g.series-liabilities``, each with
  ``data-points="N"`` and one ``circle`` per report carrying a ``<title>`` with its values.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from html import escape
from typing import Any

from reserves.model import below_one, ratio

_MINOR = re.compile(r"^-?(0|[1-9][0-9]*)$")
#: Fractional digits always shown in tables (when the asset has them): trailing zeros beyond
#: these are dropped, which keeps the decimal exact and the columns readable.
FRACTION_DIGITS_MIN = 2

# The chart's geometry, in SVG user units (the SVG scales to the page's width).
_WIDTH = 600
_HEIGHT = 260
_TOP = 44
_BOTTOM = 46
_RIGHT = 24
_CHAR_WIDTH = 7
_X_LABELS_MAX = 6
_Y_STEPS = 4


def _e(value: object) -> str:
    """``value`` as text that is safe inside an element and inside a quoted attribute."""
    return escape(str(value), quote=True)


# --- amounts -------------------------------------------------------------------------------


def _group(digits: str) -> str:
    """Digits with a comma every three from the right (string work: exact at any size)."""
    head = len(digits) % 3 or 3
    return ",".join([digits[:head]] + [digits[i:i + 3] for i in range(head, len(digits), 3)])


def decimal_text(minor: object, scale: int, fraction_min: int | None = None) -> str:
    """The amount ``minor`` (an ``int`` or a decimal string of minor units) as an exact decimal
    of ``scale`` digits with grouped thousands: ``decimal_text("-123456", 2) == "-1,234.56"``.

    ``fraction_min`` drops trailing fractional zeros down to that many digits (None keeps all
    ``scale`` of them); the value stays exact either way. ValueError when ``minor`` is not an
    integer in decimal notation, or ``scale`` is not a non-negative int.
    """
    text = str(minor) if isinstance(minor, int) and not isinstance(minor, bool) else minor
    if not isinstance(text, str) or not _MINOR.match(text):
        raise ValueError(f"{minor!r} is not an amount in minor units")
    if isinstance(scale, bool) or not isinstance(scale, int) or scale < 0:
        raise ValueError(f"{scale!r} is not a scale")
    negative = text.startswith("-") and text != "-0"
    digits = text.lstrip("-").rjust(scale + 1, "0")
    whole, fraction = digits[:len(digits) - scale], digits[len(digits) - scale:]
    if fraction_min is not None:
        fraction = fraction.rstrip("0").ljust(min(fraction_min, scale), "0")
    return ("-" if negative else "") + _group(whole) + ("." + fraction if fraction else "")


def _amount(minor: object, scale: int) -> str:
    """An amount for a table cell: exact, trailing zeros dropped down to two digits."""
    return decimal_text(minor, scale, FRACTION_DIGITS_MIN)


def _int(minor: object) -> int:
    """A minor-unit string as an int (validated like ``decimal_text``)."""
    decimal_text(minor, 0)
    return int(str(minor))


def _when(text: object) -> str:
    """An ISO 8601 time in UTC for people (``2026-12-02 10:00:00.123456 UTC``); the text as is
    when it is not one."""
    try:
        moment = datetime.fromisoformat(str(text))
    except ValueError:
        return str(text)
    if moment.tzinfo is None:
        return moment.isoformat(sep=" ")
    return moment.astimezone(UTC).replace(tzinfo=None).isoformat(sep=" ") + " UTC"


def _time(text: object) -> str:
    """A ``<time>`` element: the exact ISO text in ``datetime``, the UTC rendering shown."""
    return f'<time datetime="{_e(text)}">{_e(_when(text))}</time>'


# --- the page ------------------------------------------------------------------------------


_CSS = """
:root { --ink: #1d2430; --muted: #5b6472; --line: #dde1e7; --paper: #ffffff;
  --ground: #f5f6f8; --head: #14213d; --reserves: #1f4e79; --liabilities: #b07d2b;
  --bad: #b42318; --bad-ground: #fdf1f0; --warn: #b54708; --good: #067647; }
* { box-sizing: border-box; }
body { margin: 0; background: var(--ground); color: var(--ink);
  font: 14px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial,
  sans-serif; }
main { max-width: 1240px; margin: 0 auto; padding: 28px 24px 48px; }
header { border-bottom: 3px solid var(--head); margin-bottom: 20px; padding-bottom: 12px; }
h1 { color: var(--head); font-size: 26px; margin: 0 0 4px; font-weight: 600; }
h2 { color: var(--head); font-size: 17px; margin: 0 0 12px; font-weight: 600; }
h3 { font-size: 14px; margin: 0 0 8px; font-weight: 600; }
.meta { color: var(--muted); margin: 0; }
section { background: var(--paper); border: 1px solid var(--line); border-radius: 6px;
  padding: 18px 20px; margin-bottom: 18px; }
.note { color: var(--muted); font-size: 13px; margin: 10px 0 0; }
.scroll { overflow-x: auto; }
table.kv { width: auto; min-width: 360px; } table.kv th { white-space: nowrap; }
table { border-collapse: collapse; width: 100%; font-size: 13px; }
th, td { padding: 6px 10px; border-bottom: 1px solid var(--line); text-align: left;
  vertical-align: top; }
th { background: #f0f2f5; color: var(--muted); font-size: 11px; font-weight: 600;
  text-transform: uppercase; letter-spacing: .04em; }
td.num, th.num { text-align: right; white-space: nowrap; font-variant-numeric: tabular-nums; }
.mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, "Liberation Mono",
  monospace; font-size: 12px; word-break: break-all; }
tr.below-one td { background: var(--bad-ground); }
.neg { color: var(--bad); }
.badge { display: inline-block; border-radius: 3px; padding: 0 6px; margin-left: 2px;
  font-size: 11px; font-weight: 600; color: #fff; white-space: nowrap; }
.badge.bad { background: var(--bad); } .badge.warn { background: var(--warn); }
.badge.good { background: var(--good); }
.cards { display: flex; flex-wrap: wrap; gap: 12px; }
.card { flex: 1 1 220px; border: 1px solid var(--line); border-left: 4px solid var(--good);
  border-radius: 6px; padding: 12px 14px; background: var(--paper); }
.card.below-one { border-left-color: var(--bad); background: var(--bad-ground); }
.card .ratio { font-size: 26px; font-weight: 600; color: var(--head); }
.card.below-one .ratio { color: var(--bad); }
.card p { margin: 2px 0; color: var(--muted); font-size: 13px; }
.charts { display: grid; grid-template-columns: repeat(auto-fit, minmax(520px, 1fr));
  gap: 18px; }
figure { margin: 0; }
figcaption { font-weight: 600; margin-bottom: 6px; }
svg.chart { display: block; width: 100%; height: auto; }
.chart .grid line { stroke: #e6e9ee; } .chart .axis { stroke: #9aa3af; }
.chart text { fill: var(--muted); font-size: 11px; }
.chart polyline { fill: none; stroke-width: 2; }
.chart .legend line { stroke-width: 2; }
.chart .series-reserves polyline, .chart .legend-reserves { stroke: var(--reserves); }
.chart .series-liabilities polyline, .chart .legend-liabilities { stroke: var(--liabilities);
  stroke-dasharray: 6 4; }
.chart circle { stroke: #fff; stroke-width: 1.5; }
.chart .series-reserves circle { fill: var(--reserves); }
.chart .series-liabilities circle { fill: var(--liabilities); }
.chart .series-reserves circle.below-one { fill: var(--bad); }
details summary { cursor: pointer; color: var(--muted); font-size: 12px; }
footer { color: var(--muted); font-size: 12px; }
@media print { body { background: #fff; } section { break-inside: avoid; } }
"""


def render_report(report: Mapping[str, Any], history: Sequence[Mapping[str, Any]]) -> str:
    """The report as one self-contained HTML document (module docstring).

    ``report`` is the report's JSON; ``history`` the stored reports, oldest first and the
    current one included, each ``{"id", "taken_at", "assets": [{"asset", "scale",
    "liabilities", "on_chain"}]}``. ValueError when an amount is not a decimal string of minor
    units.
    """
    title = f"Proof of reserves, report #{report['id']}"
    body = "".join((
        _header(report), _cards(report), _reserves_table(report), _charts(history),
        _commitment(report), _snapshot(report), _addresses(report), _footer(report),
    ))
    return ('<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{_e(title)}</title>\n<style>{_CSS}</style>\n</head>\n"
            f"<body>\n<main>\n{body}</main>\n</body>\n</html>\n")


def _header(report: Mapping[str, Any]) -> str:
    """The title: the report's id, when it was taken, its format."""
    return (f'<header><h1>Proof of reserves</h1>'
            f'<p class="meta">Report <strong id="report-id">#{_e(report["id"])}</strong>'
            f' &middot; taken {_time(report["taken_at"])}'
            f' &middot; format <span class="mono">{_e(report.get("format", ""))}</span></p>'
            "</header>\n")


def _ratio_cell(asset: Mapping[str, Any]) -> str:
    """The ratio as text, marked when below 1; a dash when nothing is owed."""
    if asset.get("ratio") is None:
        return '&mdash; <span class="meta">nothing owed</span>'
    mark = ' <span class="badge bad">below 1</span>' if _is_below(asset) else ""
    return f'<span class="ratio-value">{_e(asset["ratio"])}</span>{mark}'


def _is_below(asset: Mapping[str, Any]) -> bool:
    """Whether the asset's holdings cover less than its liabilities."""
    return below_one(_int(asset["on_chain"]), _int(asset["liabilities"]))


def _cards(report: Mapping[str, Any]) -> str:
    """One card per asset: the ratio large, reserves and liabilities under it."""
    cards = []
    for a in report["assets"]:
        code, scale = _e(a["asset"]), a["scale"]
        below = _is_below(a)
        ratio_text = "no liabilities" if a.get("ratio") is None else _e(a["ratio"])
        state = (' <span class="badge bad">below 1</span>' if below
                 else ' <span class="badge good">covered</span>')
        cards.append(
            f'<div class="card{" below-one" if below else ""}" id="card-{code}">'
            f'<h3>{code}{state}</h3><div class="ratio">{ratio_text}</div>'
            f"<p>Reserves {_e(_amount(a['on_chain'], scale))} {code}</p>"
            f"<p>Liabilities {_e(_amount(a['liabilities'], scale))} {code}</p></div>")
    return ('<section id="summary"><h2>Reserve ratio per asset</h2>'
            f'<div class="cards">{"".join(cards)}</div>'
            '<p class="note">Ratio: on-chain holdings of our addresses divided by everything '
            "owed to customers, rounded down.</p></section>\n")


def _signed_cell(minor: object, scale: int, extra: str = "") -> str:
    """A numeric cell, red when negative."""
    text = _amount(minor, scale)
    negative = ' neg' if text.startswith("-") else ""
    return f'<td class="num{negative}">{_e(text)}{extra}</td>'


def _asset_row(a: Mapping[str, Any]) -> str:
    """One asset's row of the reserves table."""
    code, scale = a["asset"], a["scale"]
    below = _is_below(a)
    unexplained = ('' if a.get("explained", True) else
                   ' <span class="badge warn" title="not accounted for by a movement in flight">'
                   "unexplained</span>")
    plain = "".join(f'<td class="num">{_e(_amount(a[k], scale))}</td>' for k in (
        "liabilities_users", "liabilities_other", "liabilities", "custody", "treasury",
        "on_chain"))
    marked = ' class="below-one"' if below else ""
    return (f'<tr id="asset-{_e(code)}"{marked}>'
            f'<th scope="row">{_e(code)}</th>{plain}'
            f"{_signed_cell(a['difference'], scale, unexplained)}"
            f"{_signed_cell(a['surplus'], scale)}"
            f'<td class="num ratio">{_ratio_cell(a)}</td></tr>')


def _reserves_table(report: Mapping[str, Any]) -> str:
    """The figures per asset: liabilities, the ledger's side, the chain's side, the ratio."""
    rows = "".join(_asset_row(a) for a in report["assets"])
    head = ('<tr><th rowspan="2">Asset</th><th colspan="3">Liabilities</th>'
            '<th colspan="2">Ledger</th><th rowspan="2" class="num">On-chain</th>'
            '<th rowspan="2" class="num">Difference</th><th rowspan="2" class="num">Surplus</th>'
            '<th rowspan="2" class="num">Ratio</th></tr>'
            '<tr><th class="num">Users</th><th class="num">Other</th><th class="num">Total</th>'
            '<th class="num">Custody</th><th class="num">Treasury</th></tr>')
    return ('<section id="reserves"><h2>Reserves and liabilities</h2><div class="scroll">'
            f'<table id="reserves-table"><thead>{head}</thead><tbody>{rows}</tbody></table>'
            '</div><p class="note">Amounts in each asset\'s own unit. Difference: on-chain '
            "minus the ledger's custody and treasury (non-zero while a movement is in flight; "
            "marked when nothing explains it). Surplus: on-chain minus liabilities.</p>"
            "</section>\n")


def _commitment(report: Mapping[str, Any]) -> str:
    """The liabilities commitment: the root in full, the depth, the users, the sums."""
    tree = report["liabilities"]
    scales = {a["asset"]: a["scale"] for a in report["assets"]}
    rows = []
    for code, total in zip(tree["assets"], tree["sums"], strict=True):
        shown = (f"{_e(_amount(total, scales[code]))}" if code in scales
                 else f"{_e(decimal_text(total, 0))} minor units")
        rows.append(f'<tr><th scope="row">{_e(code)}</th><td class="num">{shown}</td></tr>')
    return ('<section id="commitment"><h2>Liabilities commitment</h2>'
            '<table class="kv"><tbody><tr><th scope="row">Root (SHA-256)</th>'
            f'<td class="mono" id="liabilities-root">{_e(tree["root"])}</td></tr>'
            f'<tr><th scope="row">Users</th><td id="liabilities-users">{_e(tree["users"])}</td>'
            f'</tr><tr><th scope="row">Tree depth</th><td>{_e(tree["depth"])}</td></tr>'
            '</tbody></table><h3 style="margin-top:14px">Sum per asset</h3>'
            f'<table class="kv" id="liabilities-sums"><tbody>{"".join(rows)}</tbody></table>'
            '<p class="note">A Merkle-sum tree over every user\'s balances: each user can check '
            "with their inclusion proof that their balances are inside these sums, against "
            "this root.</p></section>\n")


def _snapshot(report: Mapping[str, Any]) -> str:
    """Where the report was taken: the ledger point and each chain's block."""
    point = report["ledger"]
    rows = "".join(
        f'<tr><td>{_e(c["chain"])}</td><td class="num">{_e(c.get("chain_id", ""))}</td>'
        f'<td>{_e(c.get("finality", ""))}</td><td class="num">{_e(c["block_number"])}</td>'
        f'<td class="mono">{_e(c["block_hash"])}</td></tr>' for c in report["chains"])
    return ('<section id="snapshot"><h2>Snapshot</h2>'
            '<p>Ledger through posting <strong id="ledger-point">'
            f'{_e(point["through_posting_id"])}</strong>, known at {_time(point["known_at"])}.'
            '</p><div class="scroll"><table id="chains"><thead><tr><th>Chain</th>'
            '<th class="num">Chain id</th><th>Finality</th><th class="num">Block</th>'
            f"<th>Block hash</th></tr></thead><tbody>{rows}</tbody></table></div></section>\n")


def _holdings(holdings: Sequence[Mapping[str, Any]]) -> str:
    """An address's holdings, one line per asset, in the token's own decimals."""
    lines = []
    for h in holdings:
        token = h.get("token")
        about = f' title="token {_e(token)}"' if token else ""
        lines.append(f'<div{about}>{_e(_amount(h["balance"], h["decimals"]))} '
                     f'{_e(h["asset"])}</div>')
    return "".join(lines) or '<span class="meta">none</span>'


def _signature(address: Mapping[str, Any]) -> str:
    """The ownership signature in full with its message, or the mark of an external signer."""
    signature = address.get("signature")
    if not signature:
        return '<span class="badge warn">external, not signed</span>'
    message = address.get("message")
    shown = (f'<details><summary>message</summary><pre class="mono">{_e(message)}</pre>'
             "</details>") if message else ""
    return f'<span class="mono">{_e(signature)}</span>{shown}'


def _addresses(report: Mapping[str, Any]) -> str:
    """Every address of ours: chain, address, kind, holdings, signer, signature."""
    rows = "".join(
        f'<tr><td>{_e(a["chain"])}</td><td class="mono">{_e(a["address"])}</td>'
        f'<td>{_e(a.get("kind", ""))}</td><td class="num">{_holdings(a.get("holdings", []))}'
        f'</td><td>{_e(a.get("signer") or "external")}</td><td>{_signature(a)}</td></tr>'
        for a in report["addresses"])
    return ('<section id="ownership"><h2>Addresses and ownership</h2><div class="scroll">'
            '<table id="addresses"><thead><tr><th>Chain</th><th>Address</th><th>Kind</th>'
            '<th class="num">Holdings</th><th>Signer</th><th>Signature (EIP-191)</th></tr>'
            f"</thead><tbody>{rows}</tbody></table></div>"
            '<p class="note">Each signature signs the ownership message naming this report; '
            "anyone can recover the signer's address from it offline.</p></section>\n")


def _footer(report: Mapping[str, Any]) -> str:
    """How to check the report."""
    return ('<footer><p>Proof of reserves report '
            f'#{_e(report["id"])}. The liabilities tree, its proofs and their verification are '
            "specified in docs/proof-of-reserves.md; docs/verify_proof.py checks a proof with "
            "Python's standard library alone.</p></footer>\n")


# --- charts --------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Point:
    """One report's figures for one asset (minor units)."""

    report_id: str
    taken_at: str
    reserves: int
    liabilities: int


def _history_series(history: Sequence[Mapping[str, Any]]) -> dict[str, tuple[int, list[_Point]]]:
    """Per asset (in order of first appearance): its scale (the newest) and one point per
    stored report that has it, oldest first."""
    series: dict[str, tuple[int, list[_Point]]] = {}
    for item in history:
        for a in item["assets"]:
            point = _Point(str(item["id"]), str(item["taken_at"]), _int(a["on_chain"]),
                           _int(a["liabilities"]))
            _, points = series.get(a["asset"], (a["scale"], []))
            series[a["asset"]] = (a["scale"], [*points, point])
    return series


def _charts(history: Sequence[Mapping[str, Any]]) -> str:
    """Per asset, a chart of reserves against liabilities over the stored reports."""
    series = _history_series(history)
    if not series:
        return ('<section id="history"><h2>History</h2>'
                '<p class="note">No stored reports yet.</p></section>\n')
    figures = "".join(
        f'<figure><figcaption>{_e(code)}: reserves against liabilities over '
        f'{len(points)} report{"s" if len(points) != 1 else ""}</figcaption>'
        f"{_chart(code, scale, points)}</figure>"
        for code, (scale, points) in series.items())
    return (f'<section id="history"><h2>History</h2><div class="charts">{figures}</div>'
            '<p class="note">Reserves: on-chain holdings of our addresses at each report\'s '
            "blocks. Hover a point for its exact values.</p></section>\n")


def _nice_step(raw: int) -> int:
    """The smallest of 1, 2, 5 times a power of ten that is at least ``raw`` (>= 1)."""
    base: int = 10 ** (len(str(max(raw, 1))) - 1)
    return next(m * base for m in (1, 2, 5, 10) if m * base >= raw)


def _ticks(values: Sequence[int], scale: int) -> list[int]:
    """The y-axis ticks in minor units: from zero (or below, for a negative value) past the
    largest value, in a round step (integers: exact labels)."""
    low, high = min(0, *values), max(0, *values)
    span = high - low or 10**scale
    step = _nice_step(-(-span // _Y_STEPS))
    start, stop = (low // step) * step, -(-high // step) * step
    if stop == start:
        stop = start + step
    return list(range(start, stop + 1, step))


@dataclass(frozen=True)
class _Frame:
    """The plotting area and the mapping from (report index, minor units) to SVG units."""

    left: float
    count: int
    low: int
    high: int

    @property
    def right(self) -> float:
        """The plotting area's right edge."""
        return _WIDTH - _RIGHT

    @property
    def bottom(self) -> float:
        """The plotting area's bottom edge (the y of ``low``)."""
        return _HEIGHT - _BOTTOM

    def x(self, index: int) -> float:
        """The x of the ``index``-th report (reports evenly spaced; one alone is centred)."""
        if self.count == 1:
            return (self.left + self.right) / 2
        return self.left + index * (self.right - self.left) / (self.count - 1)

    def y(self, value: int) -> float:
        """The y of an amount (a float is fine here: this places pixels, it shows no money)."""
        return self.bottom - (value - self.low) / (self.high - self.low) * (self.bottom - _TOP)


def _chart(code: str, scale: int, points: Sequence[_Point]) -> str:
    """One asset's SVG line chart: grid and y labels, x labels, two series, a legend."""
    ticks = _ticks([v for p in points for v in (p.reserves, p.liabilities)], scale)
    labels = [decimal_text(t, scale, 0) for t in ticks]
    frame = _Frame(16 + _CHAR_WIDTH * max(len(label) for label in labels), len(points),
                   ticks[0], ticks[-1])
    return (f'<svg class="chart" id="chart-{_e(code)}" viewBox="0 0 {_WIDTH} {_HEIGHT}" '
            f'width="{_WIDTH}" height="{_HEIGHT}" role="img" '
            f'aria-label="{_e(code)}: reserves against liabilities">'
            f"<title>{_e(code)}: reserves (on-chain holdings) against liabilities</title>"
            f"{_y_axis(frame, ticks, labels)}{_x_axis(frame, points)}"
            f"{_series(frame, points, 'liabilities', code, scale)}"
            f"{_series(frame, points, 'reserves', code, scale)}"
            f"{_legend(frame)}</svg>")


def _y_axis(frame: _Frame, ticks: Sequence[int], labels: Sequence[str]) -> str:
    """Horizontal grid lines with their exact labels."""
    lines = "".join(
        f'<line x1="{frame.left:.1f}" x2="{frame.right:.1f}" y1="{frame.y(t):.1f}" '
        f'y2="{frame.y(t):.1f}"/>' for t in ticks)
    text = "".join(
        f'<text x="{frame.left - 8:.1f}" y="{frame.y(t) + 4:.1f}" text-anchor="end">'
        f"{_e(label)}</text>" for t, label in zip(ticks, labels, strict=True))
    axis = (f'<line class="axis" x1="{frame.left:.1f}" x2="{frame.right:.1f}" '
            f'y1="{frame.bottom:.1f}" y2="{frame.bottom:.1f}"/>')
    return f'<g class="grid">{lines}</g>{axis}<g class="y-labels">{text}</g>'


def _x_axis(frame: _Frame, points: Sequence[_Point]) -> str:
    """A few x labels (the first and last report among them): report id and date."""
    n = len(points)
    shown = sorted({round(i * (n - 1) / (_X_LABELS_MAX - 1)) for i in range(_X_LABELS_MAX)}
                   if n > _X_LABELS_MAX else set(range(n)))
    labels = []
    for i in shown:
        x, p = frame.x(i), points[i]
        # The outer labels align on their point so that they stay inside the picture.
        anchor = "middle" if n == 1 or 0 < i < n - 1 else "start" if i == 0 else "end"
        labels.append(
            f'<text x="{x:.1f}" y="{frame.bottom + 16:.1f}" text-anchor="{anchor}">'
            f"#{_e(p.report_id)}</text>"
            f'<text x="{x:.1f}" y="{frame.bottom + 30:.1f}" text-anchor="{anchor}">'
            f"{_e(_when(p.taken_at)[:10])}</text>")
    return f'<g class="x-labels">{"".join(labels)}</g>'


def _tip(p: _Point, code: str, scale: int) -> str:
    """A point's hover text: the report and its exact figures."""
    shown = ratio(p.reserves, p.liabilities)
    return (f"Report #{p.report_id}, {_when(p.taken_at)}\n"
            f"Reserves (on-chain): {_amount(p.reserves, scale)} {code}\n"
            f"Liabilities: {_amount(p.liabilities, scale)} {code}\n"
            f"Ratio: {shown if shown is not None else 'nothing owed'}")


def _series(frame: _Frame, points: Sequence[_Point], name: str, code: str, scale: int) -> str:
    """One series (``reserves`` or ``liabilities``): a line and one point per report."""
    values = [p.reserves if name == "reserves" else p.liabilities for p in points]
    coords = [(frame.x(i), frame.y(v)) for i, v in enumerate(values)]
    line = " ".join(f"{x:.1f},{y:.1f}" for x, y in coords)
    marked = ' class="below-one"'
    circles = "".join(
        f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4"'
        f'{marked if below_one(p.reserves, p.liabilities) else ""}>'
        f"<title>{_e(_tip(p, code, scale))}</title></circle>"
        for (x, y), p in zip(coords, points, strict=True))
    return (f'<g class="series series-{name}" data-points="{len(points)}">'
            f'<polyline points="{line}"/>{circles}</g>')


def _legend(frame: _Frame) -> str:
    """The two series' names, above the plotting area."""
    x = frame.left
    return ('<g class="legend">'
            f'<line class="legend-reserves" x1="{x:.1f}" x2="{x + 24:.1f}" y1="18" y2="18"/>'
            f'<text x="{x + 30:.1f}" y="22">Reserves (on-chain holdings)</text>'
            f'<line class="legend-liabilities" x1="{x + 230:.1f}" x2="{x + 254:.1f}" y1="18" '
            'y2="18"/>'
            f'<text x="{x + 260:.1f}" y="22">Liabilities</text></g>')
