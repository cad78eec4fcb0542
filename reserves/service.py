"""Proof of reserves, the use cases: take a report, read stored ones, give a user's proof.

Taking a report (:func:`take_report`), in the order that keeps every figure exact:

1. **The ledger point** (``repository.ledger_point``): one read-only snapshot holding exactly
   the postings up to a watermark. In it, every user's posted balance, the other customer
   liabilities, custody and treasury per asset, and per chain the custody check's side (the
   holdings report's ledger side, the movements in flight by name, the watcher's tip). Closed
   before any node is called.
2. **The chains**: each at one block, the one named (``at_blocks``; refused above the newest
   final block) or the newest final under its rule, read in batches (the holdings report's
   read); each position judged as the custody check judges it (``reconcile.chain_model``).
3. **The tree** (``reserves.merkle``): a fresh random salt per user; a negative balance is
   refused (a case per balance, nothing published).
4. **The ownership evidence**: the report id is drawn first, so that each message names it;
   every address holding funds (and every hot and cold address) signs through its signer,
   outside any database transaction; an address whose key the engine does not hold is listed
   as ``external``, its signature imported later (:func:`import_signatures`).
5. **Stored** in one transaction: the report, its addresses and signatures, every leaf, the
   upper nodes. The findings (holdings below liabilities, a difference nothing explains) are
   returned for the caller to record as cases, with their alerts.
"""

from __future__ import annotations

import gc
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from sqlalchemy.engine import Engine

from chains.balances import BalanceBlockMissing, BalanceBlockReplaced, read_balances
from chains.errors import ChainError
from chains.model import Confirmations, FinalizedTag, parse_finality_rule
from chains.rpc import RpcClient
from config.chains import ChainConfig, ChainsConfig
from config.uow import UnitOfWork
from outgoing.signer import Signer
from reconcile.chain_model import verdicts
from reconcile.custody import positions
from reconcile.model import CaseType, Finding
from reconcile.repository.custody import CustodySide, custody_side_in
from reserves import merkle
from reserves import repository as repo
from reserves.errors import (
    BlockNotFinal,
    ProofNotFound,
    ReportInconsistent,
    ReportNotFound,
    ReportRefused,
    SignatureRefused,
)
from reserves.model import AssetReserves, NegativeBalance, chain_to_ledger, leaves_of
from reserves.ownership import (
    REPORT_FORMAT,
    ChainPoint,
    SignerKind,
    ownership_message,
    sign_addresses,
    signature_matches,
)
from sweeps.holdings import (
    ChainHoldings,
    HoldingsUnavailable,
    RpcFactory,
    assemble,
    chain_lines,
    default_rpc,
)
from sweeps.holdings import read_chain_side as read_final
from sweeps.holdings.model import Line, final_height

log = logging.getLogger("custody.reserves")
#: The signing stage's bound: addresses not signed by then are listed unsigned (a dead remote
#: signer costs its timeout per address; thousands of deposit addresses must not add up).
SIGNING_S = 300.0

#: ``signer_of(chain, address, derivation_index)``: the signer the engine holds for one of our
#: addresses (the index is given for deposit addresses), or None: its key is elsewhere
#: (external). ``reserves.signers.EngineSigners`` is the engine's.
SignerLookup = Callable[[str, str, int | None], Signer | None]
#: ``on_progress(stage, done, total)`` while a report is taken.
ProgressCallback = Callable[[str, int, int], None]


@dataclass(frozen=True)
class Taken:
    """What taking a report did: the report (None when refused) and the findings to record."""

    report_id: int | None
    findings: list[Finding] = field(default_factory=list)


@dataclass(frozen=True)
class _ChainRead:
    chain: ChainConfig
    lines: list[Line]
    side: CustodySide
    holdings: ChainHoldings | None = None
    explained: Mapping[str, bool] = field(default_factory=dict)


@dataclass(frozen=True)
class _LedgerFigures:
    point: repo.LedgerPoint
    #: The tree's asset order (every ledger asset) and each user's balances in it.
    assets: tuple[str, ...]
    balances: list[tuple[str, tuple[int, ...]]]
    other: dict[str, int]
    custody: dict[str, int]
    treasury: dict[str, int]
    scales: dict[str, int]
    chains: list[_ChainRead]
    indexes: dict[str, dict[str, int]]


def _read_ledger(engine: Engine, config: ChainsConfig, names: Sequence[str]) -> _LedgerFigures:
    with repo.ledger_point(engine) as (uow, point):
        reads = []
        indexes = {}
        for name in names:
            chain = config.chain(name)
            lines = chain_lines(config, chain)
            reads.append(_ChainRead(chain, lines, custody_side_in(uow, chain, lines)))
            indexes[name] = repo.deposit_indexes(uow.conn, chain.family)
        custody, treasury = repo.custody_and_treasury(uow.conn)
        known = repo.asset_scales(uow.conn)
        order = merkle.asset_order(sorted(known))
        balances = repo.user_balances(uow.conn, [known[a][0] for a in order])
        return _LedgerFigures(point, order, balances, repo.other_liabilities(uow.conn),
                              custody, treasury, {a: scale for a, (_, scale) in known.items()},
                              reads, indexes)


def _block_of(rpc: RpcClient, chain: ChainConfig, at_block: int | None) -> int:
    rule = parse_finality_rule(chain.finality)
    head = rpc.block_number() if isinstance(rule, Confirmations) else 0
    finalized = None
    if isinstance(rule, FinalizedTag):
        header = rpc.get_block("finalized")
        finalized = None if header is None else header.number
    height = final_height(rule, head, finalized)
    if height is None:
        raise BlockNotFinal(f"{chain.name}: the node has no block final under {rule} yet")
    if at_block is not None and at_block > height:
        raise BlockNotFinal(f"{chain.name}: block {at_block} is not final under {rule} (the "
                            f"newest final block is {height})")
    return height if at_block is None else at_block


def _read_chain(read: _ChainRead, at_block: int | None, rpc_factory: RpcFactory) -> _ChainRead:
    chain, side = read.chain, read.side
    owned = [*chain.hot_addresses, *chain.cold_addresses, *side.ledger.deposit_addresses]
    tokens = [line.token for line in read.lines if line.token is not None]
    with rpc_factory(chain) as rpc:
        if at_block is None:
            balances = read_final(rpc, chain, owned, tokens)
        else:
            try:
                balances = read_balances(rpc, _block_of(rpc, chain, at_block), owned, tokens)
            except (BalanceBlockReplaced, BalanceBlockMissing, ChainError) as exc:
                raise HoldingsUnavailable(f"{chain.name}: block {at_block} could not be read: "
                                          f"{exc}", chain=chain.name) from exc
    holdings = assemble(chain, read.lines, side.ledger, balances)
    known = side.watcher_block is not None and side.watcher_block >= holdings.block_number
    judged = verdicts(positions(holdings, chain, side.movements), side.movements,
                      incoming_known=known)
    explained = {line.asset: all(v.explained for v in judged if v.position.asset == line.asset)
                 for line in read.lines}
    return _ChainRead(chain, read.lines, side, holdings, explained)


def _assets(figures: _LedgerFigures, reads: Sequence[_ChainRead],
            tree: merkle.Tree) -> list[AssetReserves]:
    """Per asset (every asset of a user, a chain line or custody/treasury): the figures."""
    on_chain: dict[str, int] = {}
    explained: dict[str, bool] = {}
    for r in reads:
        assert r.holdings is not None
        # Each holding converted on its own, then summed: what a reader recomputes from the
        # report's address list (docs/proof-of-reserves.md, ``on_chain``).
        for h in r.holdings.addresses:
            scale = figures.scales.get(h.line.asset, h.line.scale)
            on_chain[h.line.asset] = on_chain.get(h.line.asset, 0) + chain_to_ledger(
                h.on_chain, h.line.decimals, scale)
        for a in r.holdings.assets:
            explained[a.line.asset] = explained.get(a.line.asset, True) and \
                r.explained.get(a.line.asset, True)
    users = dict(zip(tree.assets, tree.root.sums, strict=True))
    scales = {line.asset: line.scale for r in reads for line in r.lines} | figures.scales
    codes = set(users) | set(on_chain) | set(figures.custody) | set(figures.treasury) | \
        set(figures.other)
    found = []
    for code in merkle.asset_order(sorted(codes)):
        asset = AssetReserves(
            asset=code, scale=scales.get(code, 0), liabilities_users=users.get(code, 0),
            liabilities_other=figures.other.get(code, 0), custody=figures.custody.get(code, 0),
            treasury=figures.treasury.get(code, 0), on_chain=on_chain.get(code, 0))
        # An asset no configured chain holds (custody left on a chain no longer configured,
        # say) has no movement that could explain a difference.
        found.append(replace(asset, explained=explained.get(code, asset.difference == 0)))
    return found


def _build(leaves: list[merkle.Leaf], assets: tuple[str, ...]) -> merkle.Tree:
    """The tree, with the cyclic garbage collector paused: building a million leaves
    allocates millions of tuples, none of them in a cycle, and each collection would walk them
    all again."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return merkle.build(leaves, assets)
    except merkle.ProofInvalid as exc:
        raise ReportRefused(f"the liabilities tree cannot be built: {exc}") from exc
    finally:
        if enabled:
            gc.enable()


def _negative_findings(negative: Sequence[NegativeBalance],
                       figures: _LedgerFigures) -> list[Finding]:
    found = []
    for n in negative:
        asset = n.asset
        found.append(Finding(
            type=CaseType.RESERVES_NEGATIVE_BALANCE, subject=f"reserves:user:{n.user_id}:{asset}",
            refs={"user_id": n.user_id, "asset": asset}, expected=">= 0",
            observed=str(n.balance),
            evidence={"through_posting_id": str(figures.point.through_posting_id),
                      "why": "a negative leaf would hide liabilities: no report is "
                             "published until the balance is corrected"}))
    return found


def _asset_findings(report_id: int, assets: Sequence[AssetReserves]) -> list[Finding]:
    found = []
    for a in assets:
        refs = {"asset": a.asset, "report_id": str(report_id)}
        evidence = {"ratio": a.ratio, "on_chain": str(a.on_chain),
                    "liabilities": str(a.liabilities), "ledger": str(a.ledger),
                    "difference": str(a.difference), "scale": a.scale}
        if a.below_one:
            found.append(Finding(CaseType.RESERVES_SHORTFALL, f"reserves:{a.asset}", refs,
                                 expected=str(a.liabilities), observed=str(a.on_chain),
                                 evidence=evidence))
        if not a.explained:
            found.append(Finding(CaseType.RESERVES_DIFFERENCE_UNEXPLAINED,
                                 f"reserves:{a.asset}:difference", refs,
                                 expected=str(a.ledger), observed=str(a.on_chain),
                                 evidence=evidence))
    return found


def take_report(engine: Engine, config: ChainsConfig, *, now: datetime, taken_by: str,
                signer_of: SignerLookup, at_blocks: Mapping[str, int] | None = None,
                rpc_factory: RpcFactory = default_rpc,
                random_bytes: Callable[[int], bytes] = os.urandom,
                signing_s: float = SIGNING_S,
                on_progress: ProgressCallback | None = None) -> Taken:
    """Take, sign and store a report over every configured chain (module docstring).

    Raises BlockNotFinal for a named block that is not final (or an unknown chain),
    HoldingsUnavailable when a node cannot give exact figures; nothing is stored then. A
    negative balance returns no report and its findings.
    """
    blocks = dict(at_blocks or {})
    for name in blocks:
        if name not in config.chains:
            raise BlockNotFinal(f"chain {name!r} is not configured")
    progress = on_progress or (lambda stage, done, total: None)
    figures = _read_ledger(engine, config, sorted(config.chains))
    progress("ledger", 1, 4)
    reads = [_read_chain(r, blocks.get(r.chain.name), rpc_factory) for r in figures.chains]
    progress("chains", 2, 4)
    sorted_out = leaves_of(figures.balances, figures.assets,
                           random_bytes(merkle.SALT_BYTES * len(figures.balances)))
    figures.balances.clear()  # A million rows: not kept beside the leaves.
    if sorted_out.negative:
        return Taken(None, _negative_findings(sorted_out.negative, figures))
    for asset, owed in sorted_out.outside.items():
        figures.other[asset] = figures.other.get(asset, 0) + owed
    tree = _build(sorted_out.leaves, figures.assets)
    del sorted_out
    progress("tree", 3, 4)
    assets = _assets(figures, reads, tree)
    with UnitOfWork(engine) as uow:
        report_id = repo.next_report_id(uow.conn)
        uow.commit()
    root = tree.root.hash.hex()
    addresses = _sign(report_id, root, reads, figures.indexes, signer_of, signing_s)
    document = _document(report_id, now, figures.point, reads, tree, assets)
    row = repo.ReportRow(report_id, now, figures.point.through_posting_id,
                         figures.point.known_at, root, tree.depth, len(tree.leaves), taken_by,
                         document)
    hashes = [n.hash for n in tree.levels[0][:len(tree.leaves)]]
    with UnitOfWork(engine) as uow:
        repo.allow_long_statements(uow.conn)
        repo.insert_report(uow.conn, row, addresses, list(zip(tree.leaves, hashes, strict=True)),
                           tree.nodes_from(merkle.CHUNK_LEVEL), recorded_at=now)
        uow.commit()
    progress("stored", 4, 4)
    return Taken(report_id, _asset_findings(report_id, assets))


def _holdings_of(h: ChainHoldings) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    for a in h.addresses:
        found.setdefault(a.address, []).append({
            "asset": a.line.asset, "token": a.line.token, "decimals": a.line.decimals,
            "balance": str(a.on_chain)})
    return found


def _sign(report_id: int, root: str, reads: Sequence[_ChainRead],
          indexes: Mapping[str, Mapping[str, int]], signer_of: SignerLookup,
          signing_s: float) -> list[repo.AddressRow]:
    """The report's addresses: every hot and cold address, and every deposit address holding
    anything, each signed by its signer (``reserves.ownership.sign_addresses``: outside any
    database transaction; a signer that fails leaves its address unsigned, logged)."""
    points, listed = [], []
    for r in reads:
        assert r.holdings is not None
        points.append(ChainPoint(r.chain.name, r.chain.chain_id, r.holdings.block_number,
                                 r.holdings.block_hash))
        kinds = {a.address: a.kind for a in r.holdings.addresses}
        for address, holdings in _holdings_of(r.holdings).items():
            if kinds[address] != "deposit" or any(int(h["balance"]) for h in holdings):
                listed.append((r.chain.name, address, kinds[address], holdings))
    signed = sign_addresses(
        report_id, root, points, [(c, a) for c, a, _, _ in listed],
        lambda chain, address: signer_of(chain, address, indexes[chain].get(address)),
        deadline=time.monotonic() + signing_s)
    rows = []
    for (chain, address, kind, holdings), s in zip(listed, signed, strict=True):
        if s.signature is None and s.signer == SignerKind.ENGINE:
            log.warning("reserves: report %s: %s on %s is unsigned: %s", report_id, address,
                        chain, s.detail)
        rows.append(repo.AddressRow(chain, address, kind, holdings, str(s.signer),
                                    s.signature))
    return rows


def _document(report_id: int, now: datetime, point: repo.LedgerPoint,
              reads: Sequence[_ChainRead], tree: merkle.Tree,
              assets: Sequence[AssetReserves]) -> dict[str, Any]:
    chains = []
    for r in reads:
        assert r.holdings is not None
        chains.append({"chain": r.chain.name, "chain_id": r.chain.chain_id,
                       "finality": r.chain.finality, "block_number": r.holdings.block_number,
                       "block_hash": r.holdings.block_hash})
    return {
        "format": REPORT_FORMAT, "id": report_id, "taken_at": now.isoformat(),
        "ledger": {"through_posting_id": str(point.through_posting_id),
                   "known_at": point.known_at.isoformat()},
        "chains": chains,
        "liabilities": {"root": tree.root.hash.hex(), "depth": tree.depth,
                        "users": len(tree.leaves), "assets": list(tree.assets),
                        "sums": [str(v) for v in tree.root.sums]},
        "assets": [asset_json(a) for a in assets],
    }


def asset_json(a: AssetReserves) -> dict[str, Any]:
    """One asset's figures as published (decimal strings of minor units)."""
    return {"asset": a.asset, "scale": a.scale, "liabilities_users": str(a.liabilities_users),
            "liabilities_other": str(a.liabilities_other), "liabilities": str(a.liabilities),
            "custody": str(a.custody), "treasury": str(a.treasury), "ledger": str(a.ledger),
            "on_chain": str(a.on_chain), "difference": str(a.difference),
            "surplus": str(a.surplus), "ratio": a.ratio, "explained": a.explained}


# --- reading ---------------------------------------------------------------------------------


def report_document(uow: UnitOfWork, report_id: int | None = None) -> dict[str, Any]:
    """The published report ``report_id`` (None: the newest) with its addresses and their
    signatures; ReportNotFound."""
    row = repo.get_report(uow.conn, report_id)
    if row is None:
        raise ReportNotFound("no report was taken yet" if report_id is None
                             else f"no report {report_id}")
    doc = dict(row.document)
    roots = {c["chain"]: c for c in doc["chains"]}
    doc["addresses"] = [{
        "chain": a.chain, "address": a.address, "kind": a.kind, "holdings": a.holdings,
        "message": ownership_message(row.id, a.chain, int(roots[a.chain]["chain_id"]),
                                     int(roots[a.chain]["block_number"]),
                                     str(roots[a.chain]["block_hash"]), row.root_hash,
                                     a.address),
        "signer": a.signer, "signature": a.signature}
        for a in repo.report_addresses(uow.conn, row.id)]
    return doc


def history(uow: UnitOfWork, *, limit: int = 100, before_id: int | None = None
            ) -> list[dict[str, Any]]:
    """Stored reports, newest first: id, time, and per asset the liabilities and holdings."""
    return [{"id": r.id, "taken_at": r.taken_at.isoformat(),
             "root": r.root_hash, "users": r.users_count,
             "assets": [{k: a[k] for k in ("asset", "scale", "liabilities", "on_chain",
                                           "difference", "ratio")}
                        for a in r.document["assets"]]}
            for r in repo.list_reports(uow.conn, limit=limit, before_id=before_id)]


def user_proof(uow: UnitOfWork, user_id: str, report_id: int | None = None) -> dict[str, Any]:
    """The user's inclusion proof in report ``report_id`` (None: the newest) as JSON
    (``merkle.Proof.to_json`` with the report's id, time and scales); ReportNotFound,
    ProofNotFound."""
    row = repo.get_report(uow.conn, report_id)
    if row is None:
        raise ReportNotFound("no report was taken yet" if report_id is None
                             else f"no report {report_id}")
    found = repo.leaf_of(uow.conn, row.id, user_id)
    if found is None:
        raise ProofNotFound(f"user {user_id} has no leaf in report {row.id} (no ledger "
                            "balance when it was taken)")
    index, leaf = found
    assets = tuple(row.document["liabilities"]["assets"])
    low = min(merkle.CHUNK_LEVEL, row.depth)
    base = (index >> low) << low
    chunk = repo.chunk_leaves(uow.conn, row.id, base, base + 2**low)
    chunk += [merkle.padding_node(base + i, len(assets)) for i in range(len(chunk), 2**low)]
    keys = [(lv, (index >> lv) ^ 1) for lv in range(low, row.depth)] + [(row.depth, 0)]
    upper = repo.upper_nodes(uow.conn, row.id, keys)
    scales = {a["asset"]: a["scale"] for a in row.document["assets"]}
    try:
        p = merkle.proof_from_chunk(assets, row.depth, index, chunk, upper, leaf)
        doc = p.to_json(report_id=row.id, taken_at=row.taken_at.isoformat(),
                        scales={a: scales.get(a) for a in assets})
        # Checked before it is given: a stored leaf or node changed after the report was
        # published would otherwise be found only by the user.
        merkle.verify(doc, row.root_hash)
    except merkle.ProofInvalid as exc:
        raise ReportInconsistent(f"report {row.id}: the stored tree does not give user "
                                 f"{user_id} a proof of the published root ({exc.reason}: "
                                 f"{exc})") from exc
    return doc


def import_signatures(uow: UnitOfWork, report_id: int, raw: Any, *, recorded_by: str,
                      now: datetime) -> int:
    """Record imported signatures (a JSON list of {chain, address, signature}) of report
    ``report_id``'s addresses. Each must name an address of the report and recover to it over
    its ownership message; otherwise SignatureRefused and nothing is recorded. An address
    already signed keeps its first signature. Returns how many were recorded."""
    doc = report_document(uow, report_id)
    if not isinstance(raw, list):
        raise SignatureRefused("the signatures file must hold a JSON list of "
                               "{chain, address, signature}")
    listed = {(a["chain"], a["address"]): a for a in doc["addresses"]}
    accepted = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict) or not all(isinstance(item.get(k), str)
                                                 for k in ("chain", "address", "signature")):
            raise SignatureRefused(f"item {i}: expected {{chain, address, signature}} strings")
        key = (item["chain"], item["address"].lower())
        entry = listed.get(key)
        if entry is None:
            raise SignatureRefused(f"item {i}: {key[1]} on {key[0]} is not an address of "
                                   f"report {report_id}")
        signature = item["signature"].lower()
        if not signature_matches(entry["message"], key[1], signature):
            raise SignatureRefused(f"item {i}: the signature does not recover to {key[1]} over "
                                   f"its message in report {report_id}")
        accepted.append((key[0], key[1], signature))
    return repo.insert_signatures(uow.conn, report_id, accepted, source="imported",
                                  recorded_by=recorded_by, recorded_at=now)
