"""The holdings report as JSON-ready data: every amount ``{"minor", "decimal"}``, both strings
(the API's ``api.schemas.Holdings`` and ``custody holdings --json``).
"""

from __future__ import annotations

from typing import Any

from sweeps.holdings.model import AddressHolding, AssetHoldings, Flows, HoldingsReport, Parts


def units_json(value: int, decimals: int) -> dict[str, str]:
    """An amount in on-chain units for JSON: ``{"minor": ..., "decimal": ...}``, strings (any
    size: a uint256 balance may exceed the ledger's 128-bit range)."""
    if value == 0:  # Most figures of a large report: no string arithmetic.
        return {"minor": "0", "decimal": _ZEROS.get(decimals) or _zero(decimals)}
    sign, digits = ("-" if value < 0 else ""), str(abs(value))
    if decimals == 0:
        return {"minor": str(value), "decimal": sign + digits}
    digits = digits.rjust(decimals + 1, "0")
    return {"minor": str(value), "decimal": f"{sign}{digits[:-decimals]}.{digits[-decimals:]}"}


_ZEROS: dict[int, str] = {}


def _zero(decimals: int) -> str:
    _ZEROS[decimals] = "0." + "0" * decimals if decimals else "0"
    return _ZEROS[decimals]


def _flows_json(flows: Flows, decimals: int) -> dict[str, Any]:
    return {"in_flight_in": units_json(flows.incoming, decimals),
            "in_flight_out": units_json(flows.outgoing, decimals),
            "held": units_json(flows.held, decimals)}


def _parts_json(parts: Parts, decimals: int) -> dict[str, Any]:
    return {"expected": units_json(parts.expected, decimals),
            "customer": units_json(parts.customer, decimals),
            "treasury": units_json(parts.treasury, decimals),
            "suspense": units_json(parts.suspense, decimals)}


def address_json(h: AddressHolding) -> dict[str, Any]:
    """One address row for JSON (hot and cold: the ledger figures are null)."""
    d = h.line.decimals
    parts = (dict.fromkeys(("expected", "customer", "treasury", "suspense")) if h.parts is None
             else _parts_json(h.parts, d))
    diff = h.difference
    return {"address": h.address, "kind": h.kind, "asset": h.line.asset, "token": h.line.token,
            "on_chain": units_json(h.on_chain, d), **parts,
            "difference": None if diff is None else units_json(diff, d),
            **_flows_json(h.flows, d), "sending": h.sending, "status": h.status}


def asset_json(a: AssetHoldings) -> dict[str, Any]:
    """One asset's totals for JSON: on-chain units, and the ledger's own figures (minor units of
    the asset's scale) under ``ledger``."""
    d, s, g = a.line.decimals, a.line.scale, a.group
    return {
        "asset": a.line.asset, "token": a.line.token, "decimals": d,
        "on_chain": units_json(a.on_chain, d), "custody": units_json(a.custody, d),
        "treasury": units_json(a.treasury, d),
        "custody_plus_treasury": units_json(a.ledger, d),
        "difference": units_json(a.difference, d),
        "deposits_expected": units_json(a.deposits_expected, d), **_flows_json(a.flows, d),
        "sending": a.sending, "status": a.status, "exact": a.exact, "addresses": a.addresses,
        "ledger": {"scale": s, "custody": units_json(a.custody_minor, s),
                   "treasury": units_json(a.treasury_minor, s),
                   "custody_plus_treasury": units_json(a.ledger_minor, s)},
        "hot_cold": {"on_chain": units_json(g.on_chain, d), **_parts_json(g.parts, d),
                     "difference": units_json(g.difference, d), **_flows_json(g.flows, d),
                     "sending": g.sending, "status": g.status}}


def report_json(report: HoldingsReport) -> dict[str, Any]:
    """The whole report as JSON-ready data (every amount a string; the API's schema
    ``api.schemas.Holdings`` and ``custody holdings --json`` both give this shape)."""
    return {"chains": [{
        "chain": c.chain, "finality": c.finality, "block_number": c.block_number,
        "block_hash": c.block_hash, "deposit_addresses": c.deposit_addresses,
        "hot_addresses": c.hot_addresses, "cold_addresses": c.cold_addresses,
        "ledger_read_ms": round(c.ledger_read_s * 1000), "chain_read_ms":
            round(c.chain_read_s * 1000),
        "assets": [asset_json(a) for a in c.assets],
        "addresses": [address_json(h) for h in c.addresses]} for c in report.chains]}
