"""Custody against the chain, pure: per chain, holder (a deposit address, or the hot and cold
addresses together) and asset, is the difference between what the chain holds at the final
block and what the ledger says explained by the movements in flight that the engine can name?

The figures come from the holdings report (``sweeps.holdings``), in on-chain units:
``on_chain`` at the report's block, ``expected`` (what the ledger says the holder should hold),
and what is moving there: ``incoming`` (deposits not booked yet, our own movements into it),
``outgoing`` (our movements out of it whose transaction may be on chain), ``held`` (deposits
held for review), and ``gas_max`` (the most the transactions in flight from it can pay in gas,
``gas_limit * max_fee_per_gas`` of each movement's dearest attempt; native coin only).

Each movement in flight may or may not be in the final block, so the difference
``on_chain - expected`` is explained when ``-(outgoing + gas_max) <= difference <=
incoming + held``; anything outside is a finding. When the watcher has not scanned up to the
report's block, a transfer to us there is not known to the engine yet: the upper bound is
lifted (an excess is not judged), while the lower one holds (every transaction we send is
recorded before it is sent, so nothing of ours leaves unnamed).

No database, no node, no clock: the service reads, this judges.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

#: The holder of a chain's hot and cold addresses together (the ledger has no per-address
#: accounts for them: the holdings report's group), when there is more than one such address.
GROUP = "hot+cold"
#: At most this many named movements go into a finding's evidence (the count is always there).
NAMED_MAX = 20


@dataclass(frozen=True)
class NamedMovement:
    """A movement in flight, as the engine names it: ``kind`` (``deposit``, ``held_deposit``,
    ``sweep``, ``gas_top_up``, ``cold_transfer``, ``withdrawal``), its id and state, its ends,
    its token (None: native) and amount in on-chain units, its gas bound (0: the movement pays
    no gas of ours)."""

    kind: str
    id: int
    state: str
    sender: str | None
    destination: str | None
    token: str | None
    amount: int
    gas_max: int = 0

    def to_json(self) -> dict[str, object]:
        """For a finding's evidence (amounts as decimal strings)."""
        return {"kind": self.kind, "id": self.id, "state": self.state, "from": self.sender,
                "to": self.destination, "token": self.token, "amount": str(self.amount),
                "gas_max": str(self.gas_max)}


@dataclass(frozen=True)
class Position:
    """One holder and one asset of a chain, with the holdings report's figures."""

    chain: str
    holder: str
    addresses: tuple[str, ...]
    asset: str
    token: str | None
    decimals: int
    on_chain: int
    expected: int
    incoming: int = 0
    outgoing: int = 0
    held: int = 0
    gas_max: int = 0

    @property
    def difference(self) -> int:
        """``on_chain - expected``."""
        return self.on_chain - self.expected

    @property
    def subject(self) -> str:
        """The stable key of a discrepancy here: ``custody:<chain>:<holder>:<asset>``."""
        return f"custody:{self.chain}:{self.holder}:{self.asset}"


@dataclass(frozen=True)
class Verdict:
    """A position judged: the bounds the named movements allow (``high`` None: not judged
    above, the watcher is behind) and whether the difference lies within them."""

    position: Position
    low: int
    high: int | None
    movements: tuple[NamedMovement, ...]

    @property
    def explained(self) -> bool:
        """Whether ``low <= difference <= high``."""
        d = self.position.difference
        return self.low <= d and (self.high is None or d <= self.high)


def holder_of(address: str, group: Sequence[str]) -> str:
    """The holder an address's figures are judged under: a deposit address is its own; a hot
    or cold address is the group's (the address itself when the group has only it)."""
    if address in group:
        return group[0] if len(group) == 1 else GROUP
    return address


def judge(position: Position, movements: Sequence[NamedMovement], *,
          incoming_known: bool) -> Verdict:
    """The bounds of ``position`` and the movements that touch it (its evidence)."""
    low = -(position.outgoing + position.gas_max)
    high = position.incoming + position.held if incoming_known else None
    return Verdict(position, low, high, tuple(movements))


def touches(m: NamedMovement, position: Position) -> bool:
    """Whether a movement moves ``position``'s asset at one of its addresses (or pays gas
    there, for the native coin)."""
    ends = {m.sender, m.destination} & set(position.addresses)
    if not ends:
        return False
    if m.token == position.token:
        return True
    return position.token is None and m.gas_max > 0 and m.sender in position.addresses


def verdicts(positions: Sequence[Position], movements: Sequence[NamedMovement], *,
             incoming_known: bool) -> list[Verdict]:
    """Every position judged, in the order given."""
    return [judge(p, [m for m in movements if touches(m, p)], incoming_known=incoming_known)
            for p in positions]


def evidence(v: Verdict, context: Mapping[str, object]) -> dict[str, object]:
    """A finding's evidence: the figures, the bounds, the named movements (at most
    ``NAMED_MAX``) and the ``context`` (block, finality, watcher)."""
    p = v.position
    return {
        **context, "units": f"on-chain (decimals {p.decimals})", "token": p.token,
        "addresses": list(p.addresses), "difference": str(p.difference),
        "incoming": str(p.incoming), "outgoing": str(p.outgoing), "held": str(p.held),
        "gas_max": str(p.gas_max), "allowed_low": str(v.low),
        "allowed_high": None if v.high is None else str(v.high),
        "movements_in_flight": len(v.movements),
        "movements": [m.to_json() for m in v.movements[:NAMED_MAX]],
    }
