"""The holdings report (``custody holdings``, ``GET /v1/admin/holdings``): per chain, address
and asset, what the chain holds at the report's block, what is moving, and what the ledger
says that address should hold. Proof of reserves is built on it (DESIGN.md sections 6a, 7).

What it reads, per chain:

- **Our addresses**: every deposit address of the chain's family (``deposit_addresses``, all
  of them: they are ours, with or without a deposit), the hot addresses and the cold addresses
  of the configuration. **Assets**: the native coin and every configured token (a *line*:
  ledger asset, token contract or None, on-chain decimals, ledger scale).
- **The block**: the newest block final under the chain's finality rule, the height the
  ledger counts from (``outgoing.chain.observe`` uses the same one): the node's ``finalized``
  block for the rule ``finalized``; ``head - N + 1`` for ``confirmations:N``. The chain is read
  at that explicit number, in JSON-RPC batches (:func:`chains.balances.read_balances`: one
  ``eth_getBalance`` and one ``balanceOf`` per token per address, the block hash checked
  before and after); a block replaced during the read is read again, at most
  ``CHAIN_READ_ATTEMPTS_MAX`` times.
- **The ledger side**, in one read-only ``REPEATABLE READ`` transaction (one snapshot), closed
  before the node is called: ``custody:{chain}`` and ``treasury:{chain}`` per asset, the
  per-address records (:func:`sweeps.repository.address_records`), the movements in flight and
  the held deposits. Every query is grouped in the database; none runs per address.

The figures (``int``, in the line's on-chain units unless named ``_minor``):

- A **deposit address** should hold ``expected = customer + treasury + suspense`` of its
  :class:`~sweeps.repository.AddressRecord`: credited deposits not swept (customer), deposits
  booked to suspense (suspense), final top-ups in minus the gas its final sweeps paid minus
  what its sweeps moved beyond the customer part (treasury; negative when customer native paid
  an earlier sweep's gas, which the ledger booked to the treasury). ``difference = on_chain -
  expected``.
- **Hot and cold addresses** have no per-address accounts in the ledger: each is listed with
  its on-chain balance and movements, and together they form the **hot+cold group**, whose
  expected figure is the ledger's residual: ``expected = (custody + treasury) - sum of the
  deposit addresses' expected``, split into ``customer = custody - sum(customer) -
  sum(suspense)`` (customer money, suspense booked at hot or cold addresses included: the
  ledger's suspense is not per chain) and ``treasury = treasury - sum(treasury)`` over the
  deposit addresses. ``custody`` and ``treasury`` are converted from ledger minor units to
  on-chain units exactly (:func:`ledger_to_chain`; a balance with digits below the token's
  unit, possible only when the ledger's scale exceeds the token's decimals, is rounded down
  and the asset says ``exact`` False).
- **Per asset**: ``on_chain`` (all our addresses), ``ledger = custody + treasury`` (also in
  ledger minor units with the scale), ``difference = on_chain - ledger``, which equals the sum
  of the deposit addresses' differences plus the group's. When nothing is in flight it is
  zero, exactly: on-chain holdings of our addresses equal custody + treasury.

**In flight** (``in_flight_in``, ``in_flight_out``) names what the engine is moving and has not
yet counted: deposits not final yet (``included``, ``unconfirmed``, ``final`` but not booked:
``value``) to the address; sweeps (``available``), gas top-ups (``amount``), cold transfers
(``amount``) and withdrawals (``chain_amount``) sent and not final (the states in which a
signed transaction may be on chain), out of their sender and, for movements between our own
addresses, into their destination (the watcher's deposit rows of those transfers are left out:
they are the same movement); and a transfer from a cold address to us that is not final (a
refill: out of the cold address). Each amount is the movement's own; the gas of transactions in
flight is not in it (booked once final), which is why a native row of an address that is
*sending* counts as having something in flight. **Held** is what came in and is held for
review (never booked until a person decides).

**Status** of a row: ``ok`` when the difference is 0; ``in_flight`` when it is not but
something in flight or held there may account for it; ``unexplained`` otherwise.

**Why a difference appears transiently, and the read order.** The ledger counts a deposit, a
sweep, a top-up or a payout only once its block is final under the rule, that is at or below
the report's block, which is chosen after the snapshot: whatever the snapshot counts is on
chain at that block. What is in flight in the snapshot may or may not be there yet, so its
difference is named (``in_flight``). What remains is what the engine did not know at the
snapshot: a deposit in a final block that the watcher has not recorded yet (positive
``unexplained`` until the watcher catches up), or a movement that was planned after the
snapshot and landed in a final block before the chain read (only on very short finality).
Reading the chain first would be worse: a deposit credited between the two reads would be in
the ledger and above the block read. A quiet system (tests settle everything first) gives a
deterministic report with every difference 0.

The package: ``model`` (the values and the arithmetic, pure), ``repository`` (the ledger side's
SQL, grouped), ``service`` (the block, the chain read, the report), ``render`` (JSON), and
``errors``. Everything a caller needs is importable from ``sweeps.holdings``.
"""

from sweeps.holdings.errors import HoldingsUnavailable
from sweeps.holdings.model import (
    AddressHolding,
    AddressKind,
    AssetHoldings,
    ChainHoldings,
    Flows,
    GroupHolding,
    HoldingsReport,
    LedgerSide,
    Line,
    Parts,
    Status,
    assemble,
    chain_lines,
    final_height,
    group_parts,
    ledger_to_chain,
    parts_of,
    status_of,
)
from sweeps.holdings.render import address_json, asset_json, report_json, units_json
from sweeps.holdings.service import (
    CHAIN_READ_ATTEMPTS_MAX,
    ProgressCallback,
    RpcFactory,
    chain_holdings,
    default_rpc,
    holdings,
    read_chain_side,
)

__all__ = [
    "CHAIN_READ_ATTEMPTS_MAX", "AddressHolding", "AddressKind", "AssetHoldings", "ChainHoldings",
    "Flows", "GroupHolding", "HoldingsReport", "HoldingsUnavailable", "LedgerSide", "Line",
    "Parts", "ProgressCallback", "RpcFactory", "Status", "address_json", "asset_json",
    "assemble", "chain_holdings", "chain_lines", "default_rpc", "final_height", "group_parts",
    "holdings", "ledger_to_chain", "parts_of", "read_chain_side", "report_json", "status_of",
    "units_json",
]
