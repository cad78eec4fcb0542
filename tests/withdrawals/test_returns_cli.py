"""Returned payouts, and the CLI (timeline, open items) run as a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine

from config.uow import UnitOfWork
from ledger import service as ledger
from ledger.integrity import verify
from ledger.model import Entry, credit, debit
from withdrawals import errors, service
from withdrawals.model import State
from withdrawals.service import IncomingTransfer

from .chainkit import KEY_ENV, Devnet, start_devnet
from .conftest import DEST, T0, SetOwnAddresses, balance, fund, open_book, req, write_config

pytestmark = pytest.mark.anvil
RETURN_TX = "0x" + "ab" * 32


@dataclass
class Incoming:
    """Incoming transfers by deposit key (the API layer wires the deposit histories)."""

    transfers: dict[tuple[str, str, str], IncomingTransfer] = field(default_factory=dict)

    def find(self, chain: str, tx_hash: str, position: str) -> IncomingTransfer | None:
        return self.transfers.get((chain, tx_hash, position))


@pytest.fixture
def devnet() -> Iterator[Devnet]:
    net = start_devnet()
    yield net
    net.node.stop()


def settled(engine: Engine, devnet: Devnet) -> int:
    open_book(engine)
    fund(engine, ["u1"], 150_000_000)
    w = service.request_withdrawal(engine, devnet.cfg, SetOwnAddresses(), req(),
                                   now=devnet.clock).withdrawal
    devnet.step(engine)
    devnet.node.mine(3)
    devnet.step(engine)
    assert service.get_withdrawal(engine, w.id).state is State.SETTLED
    return w.id


def test_returned_payout_is_credited_with_what_came_back_at_arrival(
        engine: Engine, devnet: Devnet) -> None:
    wid = settled(engine, devnet)
    arrived = T0 + timedelta(days=3)
    # The deposit path booked the return (29.50 of the 30 sent) to suspense at arrival.
    with UnitOfWork(engine) as uow:
        custody = ledger.get_account(uow, "custody:devnet", "USDC")
        suspense = ledger.get_account(uow, "suspense:unattributed", "USDC")
        ledger.post(uow, Entry("deposit:devnet:return", "deposit", arrived, "deposits",
                               (debit(custody, 29_500_000), credit(suspense, 29_500_000))))
        uow.commit()
    incoming = Incoming({("devnet", RETURN_TX, "log:0"): IncomingTransfer(
        "devnet", RETURN_TX, "log:0", "USDC", 29_500_000, DEST.lower(), arrived, "suspense",
        True)})
    with pytest.raises(errors.ReturnLinkInvalid, match="brought"):
        service.link_return(engine, incoming, wid, chain="devnet", tx_hash=RETURN_TX,
                            position="log:0", amount_minor=30_000_000, actor="ops",
                            reason="bounced", now=arrived)
    w = service.link_return(engine, incoming, wid, chain="devnet", tx_hash=RETURN_TX,
                            position="log:0", amount_minor=29_500_000, actor="ops",
                            reason="bounced by the receiving exchange", now=arrived)
    assert w.state is State.SETTLED
    assert balance(engine, "user:u1:wallet") == 119_600_000 + 29_500_000
    assert balance(engine, "suspense:unattributed") == 0
    tl = service.timeline(engine, wid)
    ret = tl.transactions[-1]
    assert ret.kind == "withdrawal_return" and ret.effective_at == arrived
    assert [t.kind for t in tl.transactions] == ["withdrawal_reserve", "withdrawal_settle",
                                                 "withdrawal_gas", "withdrawal_return"]
    assert [e.event for e in tl.events][-2:] == ["final_succeeded", "return_linked"]
    with pytest.raises(errors.ReturnLinkInvalid, match="already"):
        service.link_return(engine, incoming, wid, chain="devnet", tx_hash=RETURN_TX,
                            position="log:0", amount_minor=29_500_000, actor="ops",
                            reason="again", now=arrived)
    assert verify(engine).ok


def custody_cli(database_url: str, config: Path, app: str, *args: str,
                env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {**{k: v for k, v in os.environ.items() if k != KEY_ENV},
           "CUSTODY_DATABASE_URL": database_url, "CUSTODY_CONFIG": str(config),
           "COLUMNS": "250", **(env or {})}
    code = f"from api.cli_withdrawals import {app}; {app}(prog_name='custody')"
    return subprocess.run([sys.executable, "-c", code, *args], env=env, text=True,
                          capture_output=True, timeout=120)


def test_cli_show_and_open_items(engine: Engine, devnet: Devnet, database_url: str,
                                 tmp_path: Path) -> None:
    wid = settled(engine, devnet)
    stuck = service.request_withdrawal(engine, devnet.cfg, SetOwnAddresses(), req(key="k2"),
                                       now=devnet.clock).withdrawal
    config = write_config(tmp_path, devnet.toml)
    shown = custody_cli(database_url, config, "withdrawal_app", "show", str(wid))
    assert shown.returncode == 0, shown.stderr
    for word in ("settled", "final_succeeded", "attempt_signed", f"withdrawal:{wid}:settle",
                 f"withdrawal:{wid}:gas:1", "broadcast attempts"):
        assert word in shown.stdout
    missing = custody_cli(database_url, config, "withdrawal_app", "show", "999")
    assert missing.returncode == 2 and "withdrawal_not_found" in missing.stderr
    listed = custody_cli(database_url, config, "withdrawals_app", "open", "--older-than", "0s")
    assert listed.returncode == 0, listed.stderr  # young: listed, no alert
    assert str(stuck.id) in listed.stdout and "reserved" in listed.stdout
    later = custody_cli(database_url, config, "withdrawals_app", "open", "--older-than", "1h")
    assert later.returncode == 0 and "reserved" not in later.stdout
    as_json = custody_cli(database_url, config, "withdrawals_app", "open", "--json")
    assert as_json.returncode == 0, as_json.stderr
    (item,) = [i for i in json.loads(as_json.stdout) if i["withdrawal_id"] == str(stuck.id)]
    assert (item["state"], item["overdue"]) == ("reserved", False)
    assert item["open_minor"].isdigit() and int(item["open_minor"]) > 0


def test_cli_process_signs_sends_and_settles(engine: Engine, devnet: Devnet, database_url: str,
                                             tmp_path: Path) -> None:
    open_book(engine)
    fund(engine, ["u1"], 150_000_000)
    w = service.request_withdrawal(engine, devnet.cfg, SetOwnAddresses(), req(),
                                   now=devnet.clock).withdrawal
    config = write_config(tmp_path, devnet.toml)
    key = {KEY_ENV: devnet.key}
    first = custody_cli(database_url, config, "withdrawals_app", "process", "devnet",
                        "--steps", "1", "--interval-s", "0", env=key)
    assert first.returncode == 0, first.stderr
    assert "signed=1" in first.stdout and "sent=1" in first.stdout
    assert service.get_withdrawal(engine, w.id).state is State.BROADCAST
    devnet.node.mine(3)
    second = custody_cli(database_url, config, "withdrawals_app", "process", "devnet",
                         "--steps", "1", "--interval-s", "0", env=key)
    assert second.returncode == 0, second.stderr
    assert "settled=1" in second.stdout
    assert service.get_withdrawal(engine, w.id).state is State.SETTLED
    assert devnet.token_balance(DEST) == 30_000_000
    # Without the key the processor refuses to start, with the error's code.
    keyless = custody_cli(database_url, config, "withdrawals_app", "process", "devnet",
                          "--steps", "1")
    assert keyless.returncode == 2 and "signer_unavailable" in keyless.stderr
    assert verify(engine).ok
