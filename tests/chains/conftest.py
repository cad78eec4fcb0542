"""Fixtures for chain tests: real anvil nodes, no mocks.

``anvil_session`` is shared by the tests that only add transactions (they never assume block
numbers or change mining); tests that mine, reorg, roll back or switch automine off take the
function-scoped ``anvil`` and get a fresh chain. Both use ``slots_in_an_epoch=2``, so
``finalized`` trails ``latest`` by 4 blocks.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from devtools.anvil import AnvilNode, Contract

SLOTS_IN_AN_EPOCH = 2


@pytest.fixture(scope="session")
def anvil_session() -> Iterator[AnvilNode]:
    """One anvil for the whole session (automine on); do not mine, reorg or roll it back."""
    with AnvilNode.start(slots_in_an_epoch=SLOTS_IN_AN_EPOCH) as node:
        yield node


@pytest.fixture
def anvil() -> Iterator[AnvilNode]:
    """A fresh anvil for one test (automine on), free to mine, reorg and roll back."""
    with AnvilNode.start(slots_in_an_epoch=SLOTS_IN_AN_EPOCH) as node:
        yield node


@pytest.fixture(scope="session")
def usdc(anvil_session: AnvilNode) -> Contract:
    """A 6-decimals TestToken on the session node."""
    return anvil_session.deploy("TestToken", "USD Coin", "USDC", 6)


@pytest.fixture(scope="session")
def weth(anvil_session: AnvilNode) -> Contract:
    """An 18-decimals TestToken on the session node."""
    return anvil_session.deploy("TestToken", "Wrapped Ether", "WETH", 18)
