"""The hot-limit check of one chain (``check_hot_limits``): keeps each hot wallet between its
configured minimum and maximum (``[sweeps]`` ``hot_min`` / ``hot_max`` per asset).

What the hot wallet holds of an asset (``Holding.amount``, in the chain's smallest unit) is
read so that the check never moves money that may not be there, nor misses money that is
leaving:

- the smaller of its balance at the node's ``finalized`` block and at the latest block: an
  incoming transfer not final yet (a sweep, a refill) is left out, and so is an outgoing one
  that has landed but is not final yet;
- minus what the engine has committed to send from it and has no receipt for yet
  (``repository.pending_outflows``: withdrawals from request to an undetermined outcome, gas
  top-ups, cold transfers), which neither balance shows yet.

The chain is read first, outside any database transaction; then, per asset, one transaction
decides (and locks what it decides on):

- above the maximum: an ``above_max`` episode opens (once; the ``custody.alerts`` line is
  logged when it opens) and, unless a cold transfer of that chain and asset is in flight, the
  excess is proposed to the asset's cold address (``model.cold_excess``: the holding less
  the maximum, in whole ledger units; for the native coin never below the most the transfer's
  gas can cost, so it cannot fail for lack of funds), by the actor ``sweeper``, needing one
  admin's approval or two
  above ``cold_dual_approval_above``. It is signed only once approved (``sending``). If an
  admin rejects an automatic proposal, none is made again until the episode ends, so the
  check does not ask again and again for what an admin refused;
- below the minimum: a ``below_min`` episode opens (the alert line once) and a refill request
  from the asset's cold address is opened for it (``model.refill_amount``), unless one is open
  already; the refill is signed outside the engine (cold addresses are watch-only) and the
  watcher matches its arrival to the request (``deposits.own``). The scheduler raises the
  outbox alert of each open low episode (``api.jobs``);
- within the limits: the open episodes of the asset end.

At most one cold transfer per (chain, asset) is in flight, whoever proposed it: the partial
unique index ``cold_transfers_one_open`` refuses a second one, so a check racing an admin's
proposal (or another check) writes nothing.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import Any

from sqlalchemy.engine import Engine

from chains.balances import read_balances
from config.sweeps import SweepAssetConfig
from config.uow import UnitOfWork, run_in_transaction
from sweeps import model
from sweeps import repository as repo
from sweeps.errors import HotHoldingUnavailable
from sweeps.model import LimitSide
from sweeps.repository import EpisodeRecord
from sweeps.sending import ACTOR, SweepContext
from withdrawals.model import to_chain_units

log = logging.getLogger("sweeps")
alerts = logging.getLogger("custody.alerts")


@dataclass(frozen=True)
class Holding:
    """What the hot wallet holds of one asset, as the check reads it (chain units)."""

    asset: SweepAssetConfig
    hot_wallet: str
    finalized_block: int
    finalized: int
    latest_block: int
    latest: int
    #: Committed to leave, without a receipt yet (``repository.pending_outflows``).
    pending_out: int

    @property
    def amount(self) -> int:
        """The holding the limits are compared with (see the module docstring)."""
        return min(self.finalized, self.latest) - self.pending_out

    @property
    def unit(self) -> int:
        """The chain units of one minor unit of the ledger asset."""
        unit: int = 10 ** (self.asset.decimals - self.asset.scale)
        return unit

    def limit(self, minor: int | None) -> int | None:
        """A configured limit (ledger minor units) in chain units."""
        return None if minor is None else to_chain_units(minor, self.asset.scale,
                                                         self.asset.decimals)

    def evidence(self) -> dict[str, Any]:
        """The figures, as a history row's or an alert's evidence (amounts as strings)."""
        return {"hot_wallet": self.hot_wallet, "finalized_block": self.finalized_block,
                "finalized_balance": str(self.finalized), "latest_block": self.latest_block,
                "latest_balance": str(self.latest), "pending_outflows": str(self.pending_out),
                "holding": str(self.amount), "decimals": self.asset.decimals}

    def shown(self, chain_amount: int) -> str:
        """A chain amount as a decimal of the asset, for people (exact)."""
        return f"{model.format_units(chain_amount, self.asset.decimals)} {self.asset.asset}"


@dataclass
class LimitsReport:
    """What one check saw and did."""

    holdings: list[Holding] = field(default_factory=list)
    episodes_started: list[int] = field(default_factory=list)
    episodes_ended: list[int] = field(default_factory=list)
    #: Ids of the cold transfers proposed.
    proposed: list[int] = field(default_factory=list)
    #: Ids of the refill requests opened.
    refills: list[int] = field(default_factory=list)


def limited_assets(ctx: SweepContext) -> list[SweepAssetConfig]:
    """The chain's assets that have a hot minimum or maximum."""
    return [a for a in ctx.cfg.chain_assets(ctx.chain.name)
            if a.hot_min_minor is not None or a.hot_max_minor is not None]


def read_holdings(engine: Engine, ctx: SweepContext) -> list[Holding]:
    """The hot wallet's holding of every limited asset: two balance reads (finalized block,
    latest block) outside any transaction, then one short read of the pending outflows."""
    assets = limited_assets(ctx)
    if not assets:
        return []
    finalized = ctx.rpc.get_block("finalized")
    if finalized is None:
        raise HotHoldingUnavailable(f"{ctx.chain.name}: the node reports no finalized block")
    latest_block = ctx.rpc.block_number()
    hot = ctx.hot.address
    tokens = [a.token for a in assets if a.token is not None]
    at_final = read_balances(ctx.rpc, finalized.number, [hot], tokens)
    at_latest = read_balances(ctx.rpc, latest_block, [hot], tokens)

    def held(balances: Any, a: SweepAssetConfig) -> int:
        value: int = (balances.native_minor[hot] if a.token is None
                      else balances.tokens_minor[(hot, a.token)])
        return value

    with UnitOfWork(engine) as uow:
        return [Holding(a, hot, finalized.number, held(at_final, a), latest_block,
                        held(at_latest, a),
                        repo.pending_outflows(uow.conn, ctx.chain.name, hot, a.token))
                for a in assets]


def check_hot_limits(engine: Engine, ctx: SweepContext, now: datetime) -> LimitsReport:
    """One check of the chain's hot wallet against its limits (see the module docstring)."""
    report = LimitsReport(holdings=read_holdings(engine, ctx))
    for h in report.holdings:
        run_in_transaction(engine, partial(_decide, ctx=ctx, h=h, now=now, report=report))
    return report


def _decide(uow: UnitOfWork, ctx: SweepContext, h: Holding, now: datetime,
            report: LimitsReport) -> None:
    a = h.asset
    side = model.limit_side(h.amount, h.limit(a.hot_min_minor), h.limit(a.hot_max_minor))
    for other in LimitSide:
        ended = (None if other is side else
                 repo.open_episode(uow.conn, a.chain, a.asset, other, for_update=True))
        if ended is not None:
            repo.end_episode(uow.conn, ended.id, h.amount, now)
            report.episodes_ended.append(ended.id)
            log.info("hot wallet %s on %s: %s back within its limits (episode %s ended)",
                     h.hot_wallet, a.chain, h.shown(h.amount), ended.id)
    if side is None:
        return
    episode = repo.open_episode(uow.conn, a.chain, a.asset, side, for_update=True)
    if episode is None:
        limit = h.limit(a.hot_max_minor if side is LimitSide.ABOVE_MAX else a.hot_min_minor)
        assert limit is not None
        episode = repo.start_episode(uow.conn, chain=a.chain, asset=a.asset, side=side,
                                     hot_wallet=h.hot_wallet, limit_amount=limit,
                                     holding=h.amount, finalized_block=h.finalized_block,
                                     at=now)
        if episode is None:
            return  # Another check opened it meanwhile and decides for it.
        report.episodes_started.append(episode.id)
        alerts.warning("hot wallet %s on %s holds %s, %s its %s of %s (episode %s)",
                       h.hot_wallet, a.chain, h.shown(h.amount),
                       "above" if side is LimitSide.ABOVE_MAX else "below",
                       "maximum" if side is LimitSide.ABOVE_MAX else "minimum",
                       h.shown(limit), episode.id)
    if side is LimitSide.ABOVE_MAX:
        _propose_excess(uow, ctx, h, episode, now, report)
    else:
        _request_refill(uow, ctx, h, episode, now, report)


def _propose_excess(uow: UnitOfWork, ctx: SweepContext, h: Holding, episode: EpisodeRecord,
                    now: datetime, report: LimitsReport) -> None:
    a = h.asset
    if repo.open_cold_transfer(uow.conn, a.chain, a.asset) is not None:
        return  # One at a time: the one in flight lowers the holding once it is final.
    rejected = repo.rejected_proposal_since(uow.conn, a.chain, a.asset, ACTOR,
                                            episode.started_at)
    if rejected is not None:
        return  # An admin refused it in this episode: not asked again until it ends.
    native = a.token is None
    gas_limit = ctx.hot.gas_limit_native if native else ctx.hot.gas_limit_token
    reserve = gas_limit * ctx.hot.max_fee_per_gas_cap_wei if native else 0
    amount = model.cold_excess(h.amount, h.limit(a.hot_max_minor), reserve, h.unit)
    if amount <= 0 or a.cold_address is None:
        return
    amount_minor = amount // h.unit
    required = model.cold_approvals_required(amount_minor, a.cold_dual_approval_above_minor)
    limit = h.limit(a.hot_max_minor)
    assert limit is not None
    cold_id = repo.propose_cold(
        uow.conn, chain=a.chain, asset=a.asset, token=a.token, sender=h.hot_wallet,
        destination=a.cold_address, amount=amount, approvals_required=required,
        proposed_by=ACTOR, reason=(f"hot wallet holds {h.shown(h.amount)}, above its maximum "
                                   f"of {h.shown(limit)}: the excess to cold"),
        gas_limit=gas_limit, request_key=None, at=now,
        evidence={**h.evidence(), "hot_max": str(limit), "gas_reserve": str(reserve),
                  "episode_id": episode.id})
    if cold_id is None:
        return  # An admin proposed one meanwhile.
    report.proposed.append(cold_id)
    alerts.warning("cold transfer %s proposed: %s from %s to %s on %s; it is signed once "
                   "%s admin(s) approve it", cold_id, h.shown(amount), h.hot_wallet,
                   a.cold_address, a.chain, required)


def _request_refill(uow: UnitOfWork, ctx: SweepContext, h: Holding, episode: EpisodeRecord,
                    now: datetime, report: LimitsReport) -> None:
    a = h.asset
    if episode.refill_request_id is not None:
        return
    open_id = repo.open_refill(uow.conn, a.chain, a.asset, h.hot_wallet)
    if open_id is not None:
        repo.set_episode_refill(uow.conn, episode.id, open_id)
        return
    hot_min = h.limit(a.hot_min_minor)
    assert hot_min is not None
    amount = model.refill_amount(h.amount, hot_min, h.limit(a.hot_max_minor), h.unit)
    if amount <= 0 or a.cold_address is None:
        return  # Nothing to ask for, or no cold address to ask it from: the alert says so.
    refill_id = repo.insert_refill(
        uow.conn, chain=a.chain, asset=a.asset, token=a.token, source=a.cold_address,
        destination=h.hot_wallet, amount=amount, requested_by=ACTOR,
        reason=(f"hot wallet holds {h.shown(h.amount)}, below its minimum of "
                f"{h.shown(hot_min)}: a refill from cold"), request_key=None, at=now)
    assert refill_id is not None, "a request without a key always inserts"
    repo.set_episode_refill(uow.conn, episode.id, refill_id)
    report.refills.append(refill_id)
    alerts.warning("refill request %s: send %s from %s to %s on %s (the watcher matches it)",
                   refill_id, h.shown(amount), a.cold_address, h.hot_wallet, a.chain)


@dataclass(frozen=True)
class LowEpisode:
    """An open low episode with its refill request, for the alert that asks for the refill."""

    episode: EpisodeRecord
    refill: repo.RefillRecord | None


def low_episodes(engine: Engine, chain: str) -> list[LowEpisode]:
    """The chain's open ``below_min`` episodes, oldest first."""
    with UnitOfWork(engine) as uow:
        found = repo.open_episodes(uow.conn, chain, LimitSide.BELOW_MIN)
        return [LowEpisode(e, None if e.refill_request_id is None
                           else repo.get_refill(uow.conn, e.refill_request_id))
                for e in found]
