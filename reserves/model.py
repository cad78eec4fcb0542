"""Proof of reserves, the pure part of a report: per asset the liabilities, the ledger's custody
and treasury, the chain's holdings, the difference and the reserve ratio; the leaves of the
liabilities tree from the users' balances. Plain values in, plain values out (no database, no
node, no clock).

Every amount is an ``int`` in the asset's ledger minor units (``scale`` digits). The ratio is
``on_chain / liabilities`` as an exact decimal string rounded down to :data:`RATIO_DIGITS`
digits (rounding down never shows more cover than there is); None when nothing is owed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from reserves.merkle import Leaf, is_user_id

#: Digits after the point of a reserve ratio.
RATIO_DIGITS = 6


def ratio(on_chain: int, liabilities: int) -> str | None:
    """``on_chain / liabilities`` rounded down to RATIO_DIGITS digits, as a decimal string;
    None when ``liabilities`` is 0 (nothing owed: no ratio)."""
    if liabilities <= 0:
        return None
    scaled = (max(on_chain, 0) * 10**RATIO_DIGITS) // liabilities
    whole, frac = divmod(scaled, 10**RATIO_DIGITS)
    return f"{whole}.{frac:0{RATIO_DIGITS}d}"


def below_one(on_chain: int, liabilities: int) -> bool:
    """Whether the holdings cover less than what is owed (exact, not through the ratio)."""
    return on_chain < liabilities


def chain_to_ledger(value: int, decimals: int, scale: int) -> int:
    """An on-chain amount (``decimals`` digits) in ledger minor units (``scale`` digits),
    rounded down when the token has more digits than the ledger keeps: reserves are never
    overstated."""
    if scale >= decimals:
        factor: int = 10 ** (scale - decimals)
        return value * factor
    divisor: int = 10 ** (decimals - scale)
    return value // divisor


@dataclass(frozen=True)
class AssetReserves:
    """One asset of a report (ledger minor units of ``scale``).

    ``liabilities_users``: the tree's sum (every user's wallet + withdrawals reserved);
    ``liabilities_other``: customer money owed to no user yet (suspense, provider clearing);
    ``custody`` and ``treasury``: the ledger's accounts over every chain; ``on_chain``: what all
    our addresses hold at the report's blocks; ``explained``: every position of the asset whose
    chain figure differs from the ledger's is accounted for by a named movement in flight.
    """

    asset: str
    scale: int
    liabilities_users: int
    liabilities_other: int
    custody: int
    treasury: int
    on_chain: int
    explained: bool = True

    @property
    def liabilities(self) -> int:
        """Everything owed to customers."""
        return self.liabilities_users + self.liabilities_other

    @property
    def ledger(self) -> int:
        """What the ledger says our addresses hold: custody + treasury."""
        return self.custody + self.treasury

    @property
    def difference(self) -> int:
        """``on_chain - ledger``: zero when nothing is in flight."""
        return self.on_chain - self.ledger

    @property
    def surplus(self) -> int:
        """``on_chain - liabilities``: negative when customers are not covered."""
        return self.on_chain - self.liabilities

    @property
    def ratio(self) -> str | None:
        """The reserve ratio (module docstring)."""
        return ratio(self.on_chain, self.liabilities)

    @property
    def below_one(self) -> bool:
        """Whether the holdings cover less than the liabilities."""
        return below_one(self.on_chain, self.liabilities)


@dataclass(frozen=True)
class NegativeBalance:
    """A user's balance that cannot go into the tree (negative: it would hide liabilities)."""

    user_id: str
    asset: str
    balance: int


@dataclass(frozen=True)
class Leaves:
    """The users' balances sorted out for a report: the tree's leaves, every negative balance
    (each stops the report), and per asset what is owed to ids the tree cannot hold (the
    company's own users, such as ``company:refunds``: counted with the other liabilities)."""

    leaves: list[Leaf]
    negative: list[NegativeBalance]
    outside: dict[str, int]


def leaves_of(balances: Iterable[tuple[str, tuple[int, ...]]], assets: Sequence[str],
              salts: bytes) -> Leaves:
    """The tree's leaves from ``(user_id, balances)`` rows (balances in ``assets``, the tree's
    order); the n-th leaf's salt is the n-th 32 bytes of ``salts`` (at least 32 per row)."""
    leaves: list[Leaf] = []
    negative: list[NegativeBalance] = []
    outside: dict[str, int] = {}
    for user_id, row in balances:
        if min(row, default=0) < 0:
            negative += [NegativeBalance(user_id, assets[j], v) for j, v in enumerate(row)
                         if v < 0]
        if is_user_id(user_id):
            n = len(leaves)
            leaves.append(Leaf(user_id, salts[32 * n:32 * n + 32], row))
        else:
            for asset, v in zip(assets, row, strict=True):
                outside[asset] = outside.get(asset, 0) + v
    return Leaves(leaves, negative, outside)
