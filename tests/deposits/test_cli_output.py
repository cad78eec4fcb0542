"""``custody timeline`` and ``custody deposits`` at 80 columns with the output piped: every
digit, every hash, accounts by code, and no deposit shown in a block it left."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from api.schemas import DepositPage, DepositTimeline
from chains.rpc import to_quantity
from tests.api.test_cli_output import BIG, BIG_DECIMAL, custody
from tests.deposits.conftest import ALICE, CAROL, Rig

pytestmark = pytest.mark.anvil


def test_timeline_and_deposits_keep_every_digit_and_hash(rig: Rig, database_url: str) -> None:
    addr = rig.user("alice")
    tx = rig.node.transact(rig.tokens.dai, "transfer", [addr, BIG], ALICE)
    rig.node.mine(3)
    rig.step()
    assert rig.deposits(tx) == {"log:0": "credited"}
    shown = custody(database_url, "timeline", "dev", tx)
    assert shown.returncode == 0, shown.stderr
    out = shown.stdout
    assert "…" not in out
    assert tx in out and addr.lower() in out.lower()
    assert f"{BIG_DECIMAL} DAI ({BIG})" in out
    # The posting lines name accounts by code, with the decimal and the minor units.
    assert "user:alice:wallet" in out and "custody:dev" in out
    assert f"-{BIG_DECIMAL} DAI (-{BIG})" in out
    listed = custody(database_url, "deposits", "alice")
    assert listed.returncode == 0, listed.stderr
    assert tx in listed.stdout and BIG_DECIMAL in listed.stdout and "…" not in listed.stdout


def test_json_is_the_api_shape(rig: Rig, database_url: str) -> None:
    addr = rig.user("alice")
    tx = rig.node.transact(rig.tokens.dai, "transfer", [addr, BIG], ALICE)
    rig.node.mine(3)
    rig.step()
    shown = custody(database_url, "timeline", "dev", tx, "--json")
    assert shown.returncode == 0, shown.stderr
    body = DepositTimeline.model_validate(json.loads(shown.stdout))
    [transfer] = body.transfers
    assert transfer.deposit.tx_hash == tx and transfer.deposit.amount is not None
    assert transfer.deposit.amount.minor == str(BIG)
    assert transfer.deposit.amount.decimal == BIG_DECIMAL
    assert [e.event for e in transfer.events][-1] == "attested_for_user"
    listed = custody(database_url, "deposits", "alice", "--json")
    assert listed.returncode == 0, listed.stderr
    page = DepositPage.model_validate(json.loads(listed.stdout))
    assert [d.tx_hash for d in page.items] == [tx] and page.next_cursor is None


def test_a_failed_deposit_is_shown_out_of_its_old_block(rig: Rig, database_url: str,
                                                       tmp_path: Path) -> None:
    addr = rig.user("alice")
    ours = rig.node.send_eth(ALICE, addr, 10**18)
    rig.node.mine(1)
    receipt = rig.node.receipt(ours)
    old_block, old_hash = int(receipt["blockNumber"], 16), receipt["blockHash"]
    nonce = int(rig.node.rpc.get_transaction(ours)["nonce"], 16)  # type: ignore[index]
    rig.step()
    other = {"from": ALICE, "to": CAROL, "value": to_quantity(1), "nonce": to_quantity(nonce)}
    rig.node.reorg(1, [(other, 0)])
    rig.step()
    rig.node.mine(2)
    rig.step(2)
    assert rig.deposits(ours) == {"call:0": "failed"}
    shown = custody(database_url, "timeline", "dev", ours)
    assert shown.returncode == 0, shown.stderr
    out = shown.stdout
    # The old block hash appears once: on the row of the inclusion, not after the reorg.
    assert out.count(old_hash) == 1
    records = out.split("\n\n")
    reorged = next(r for r in records if "block_reorged_out" in r)
    failed = next(r for r in records if "nonce_consumed" in r and "event:" in r)
    for record in (reorged, failed):
        assert f"removed from block {old_block}" in record
    assert f"nonce {nonce} of {ALICE.lower()}" in failed.lower()
    # The transaction that used the nonce, as the node names it (its hash, whole).
    consumer = rig.node.rpc.request("ots_getTransactionBySenderAndNonce",
                                    [ALICE, to_quantity(nonce)])
    assert isinstance(consumer, str) and consumer.lower() != ours.lower()
    assert f"used by transaction {consumer.lower()}" in failed.lower()
    listed = custody(database_url, "deposits", "alice")
    assert f"removed from block {old_block}" in listed.stdout
    # Never credited, ETH is not in the ledger: its scale comes from the configuration file.
    assert "1000000000000000000 (minor units)" in out
    config = tmp_path / "chains.toml"
    config.write_text('[assets.ETH]\nscale = 18\n[chains.dev]\nchain_id = 31337\n'
                      f'rpc_url = "{rig.node.url}"\nfinality = "confirmations:3"\n'
                      'native_asset = "ETH"\n')
    configured = custody(database_url, "timeline", "dev", ours,
                         env={"CUSTODY_CONFIG": str(config)})
    assert "1.000000000000000000 ETH (1000000000000000000)" in configured.stdout
    as_json = custody(database_url, "timeline", "dev", ours, "--json",
                      env={"CUSTODY_CONFIG": str(config)})
    [transfer] = DepositTimeline.model_validate(json.loads(as_json.stdout)).transfers
    assert transfer.deposit.amount is not None
    assert transfer.deposit.amount.decimal == "1.000000000000000000"

