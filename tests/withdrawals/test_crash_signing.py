"""Crash safety of signing with a remote signer: a real processor subprocess (``python -m
withdrawals.processor``) signing through a real HTTP signing service that answers after random
small delays, SIGKILLed at random moments around signing (mostly while a signature is being
made or just after it came back: between transactions A and B, inside B, before the send).

Afterwards every withdrawal is settled and paid exactly once on chain (Transfer logs counted
per destination), the hot wallet's on-chain nonce equals the number of distinct nonces used,
the database's nonces are consecutive from 0 (no gap), and the ledger verifies.
"""

from __future__ import annotations

import os
import random
import time
from collections import Counter
from pathlib import Path

import pytest
import sqlalchemy as sa
from eth_account import Account
from sqlalchemy.engine import Engine

from chains.evm import TRANSFER_TOPIC
from ledger.integrity import verify
from tests.support.signing_service import SigningService
from withdrawals import service
from withdrawals.model import State

from .chainkit import remote_toml, start_devnet
from .conftest import SetOwnAddresses, fund, open_book, req, write_config
from .test_crash import spawn, stop, wait_ready

pytestmark = [pytest.mark.anvil, pytest.mark.slow]
WITHDRAWALS = 8
KILLS = 9


def test_sigkill_around_remote_signing_pays_each_once_without_a_nonce_gap(
        engine: Engine, database_url: str, tmp_path: Path) -> None:
    rng = random.Random(20261201)
    net = start_devnet(finality="confirmations:2", automine=True)
    svc = SigningService(net.key, seed=7)
    svc.random_delay_s = 0.08
    try:
        config = write_config(tmp_path, remote_toml(net.toml, url=svc.url, timeout_ms=3_000))
        env = {**os.environ, "CUSTODY_DATABASE_URL": database_url, "CUSTODY_CONFIG": str(config)}
        open_book(engine)
        users = [f"u{i}" for i in range(3)]
        fund(engine, users, 1_000_000_000)
        destinations = [str(Account.create().address) for _ in range(WITHDRAWALS)]
        ids: list[int] = []
        for kill in range(KILLS):
            if len(ids) < WITHDRAWALS:  # New work at almost every round: fresh signing.
                n = len(ids)
                ids.append(service.request_withdrawal(
                    engine, net.cfg, SetOwnAddresses(),
                    req(users[n % 3], 5_000_000 + n, f"s{n}", destination=destinations[n]),
                    now=net.clock).withdrawal.id)
            svc.entered.clear()
            # Every third round the signer is slow and the kill lands before it answers (a
            # signature lost between transactions A and B); every third, around its answer
            # (before B, inside B, before or after the send); every third, anywhere.
            svc.delay_s = 0.3 if kill % 3 == 0 else 0.0
            proc = spawn(env)
            wait_ready(proc)
            if kill % 3 != 2 and svc.entered.wait(8):
                time.sleep(rng.uniform(0.0, 0.2 if kill % 3 == 0 else 0.12))
            else:
                time.sleep(rng.uniform(0.0, 0.5))
            stop(proc)
            net.node.mine(1)
        while len(ids) < WITHDRAWALS:
            n = len(ids)
            ids.append(service.request_withdrawal(
                engine, net.cfg, SetOwnAddresses(),
                req(users[n % 3], 5_000_000 + n, f"s{n}", destination=destinations[n]),
                now=net.clock).withdrawal.id)
        # A last processor finishes the work, blocks mined for finality meanwhile.
        proc = spawn(env)
        try:
            wait_ready(proc)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                if all(service.get_withdrawal(engine, i).state.terminal for i in ids):
                    break
                net.node.mine(1)
                time.sleep(0.2)
        finally:
            stop(proc)

        withdrawals = [service.get_withdrawal(engine, i) for i in ids]
        assert [w.state for w in withdrawals] == [State.SETTLED] * WITHDRAWALS
        logs = net.node.rpc.get_logs(0, "latest", [net.token.address], [TRANSFER_TOPIC])
        hot_topic = "0x" + "0" * 24 + net.hot[2:]
        paid = Counter("0x" + log["topics"][2][-40:] for log in logs
                       if log["topics"][1] == hot_topic)
        assert paid == Counter(d.lower() for d in destinations), "a payout missing or doubled"
        with engine.connect() as conn:
            attempt_nonces = set(conn.execute(sa.text(
                "SELECT DISTINCT nonce FROM outgoing_attempts")).scalars())
            next_nonce = conn.execute(sa.text(
                "SELECT next_nonce FROM sender_nonces WHERE address = :a"),
                {"a": net.hot}).scalar_one()
        nonces = sorted(w.nonce for w in withdrawals if w.nonce is not None)
        assert nonces == list(range(WITHDRAWALS)), "the database's nonces have a gap"
        assert attempt_nonces == set(nonces) and next_nonce == WITHDRAWALS
        assert net.node.rpc.get_transaction_count(net.hot) == len(set(nonces))
        # Kills landed in the middle of signing: those nonces were asked for again, and still
        # each was paid once.
        asked = Counter(int(body["nonce"]) for body in svc.requests)
        assert set(asked) == set(nonces) and max(asked.values()) > 1, asked
        report = verify(engine)
        assert report.ok, report.discrepancies
    finally:
        svc.close()
        net.node.stop()
