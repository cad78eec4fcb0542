"""Deposit addresses signed by an external signer by derivation path: with an xpub source the
engine holds no key; a configured signing service signs each sweep as its deposit address, the
request naming the address's path, and the sweep completes exactly. Without one, sweeps are
proposed and nothing is signed."""

from __future__ import annotations

import pytest
from sqlalchemy.engine import Engine

from devtools.anvil import DEV_MNEMONIC, AnvilNode
from ledger.integrity import verify
from tests.support.signing_service import SigningService

from .conftest import ETH, USDC, make_rig

pytestmark = pytest.mark.anvil
URL_ENV = "CUSTODY_TEST_SWEEP_SIGNER_URL"


def test_an_external_signer_signs_each_deposit_address_by_its_path(
        engine: Engine, node: AnvilNode, monkeypatch: pytest.MonkeyPatch) -> None:
    rig = make_rig(engine, node, monkeypatch, xpub=True)
    # The xpub is the dev mnemonic's account 1: the path the signer is asked for names it.
    rig.doc["address_sources"]["evm"] |= {"signer_url_env": URL_ENV, "account": 1}
    with SigningService("0x" + "11" * 32, mnemonic=DEV_MNEMONIC) as service:
        monkeypatch.setenv(URL_ENV, service.url)
        rig.fund_treasury(ETH)
        rig.deposit_eth("a", ETH // 4)
        rig.deposit_usdc("b", 50 * USDC)
        rig.settle(sweep=False)
        rig.settle()
        paths = sorted(str(r["derivation_path"]) for r in service.requests)
    sweeps = rig.rows("SELECT address, state, derivation_index FROM sweeps ORDER BY id")
    assert [s.state for s in sweeps] == ["final", "final"]
    # One request per sweep, each naming its address's path (the top-up is the hot wallet's).
    assert paths == sorted(f"m/44'/60'/1'/0/{s.derivation_index}" for s in sweeps)
    assert rig.on_chain(rig.user("b"))[1] == 0 and rig.on_chain(rig.hot)[1] == 50 * USDC
    assert verify(rig.engine).ok


def test_without_a_signer_an_xpub_source_only_proposes(
        engine: Engine, node: AnvilNode, monkeypatch: pytest.MonkeyPatch) -> None:
    rig = make_rig(engine, node, monkeypatch, xpub=True)
    rig.fund_treasury(ETH)
    rig.deposit_eth("a", ETH // 4)
    rig.settle(sweep=False)
    report = rig.sweep()
    assert report.proposed == 1 and report.signed == 0
    assert [r.state for r in rig.rows("SELECT state FROM sweeps")] == ["proposed"]
    assert rig.rows("SELECT count(*) AS n FROM outgoing_attempts")[0].n == 0
    assert rig.rows("SELECT count(*) AS n FROM sender_nonces")[0].n == 0
    for _ in range(3):
        rig.node.mine(1)
        rig.sweep()
    assert rig.rows("SELECT count(*) AS n FROM sweeps")[0].n == 1  # Listed once, never signed.
    assert rig.on_chain(rig.user("a"))[0] == ETH // 4
