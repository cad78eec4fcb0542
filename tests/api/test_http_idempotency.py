"""Idempotency-Key on money-moving requests: missing, reused, in progress, replayed, and under
real parallel requests (threads against a real uvicorn)."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from api import idempotency
from config.uow import UnitOfWork
from tests.api.conftest import DEST, Api, fund_transaction
from tests.withdrawals.conftest import balance, fund

BODY = {"asset": "USDC", "chain": "devnet", "to": DEST, "amount": "30000000"}


def count(engine: Engine, sql: str, **params: Any) -> int:
    with engine.connect() as conn:
        return int(conn.execute(sa.text(sql), params).scalar_one())


def withdraw(api: Api, user: str, key: str | None, body: dict[str, Any] = BODY) -> httpx.Response:
    return api.call("POST", f"/v1/users/{user}/withdrawals", "acme", idem=key, json=body)


def test_missing_key_is_400_and_changes_nothing(api: Api) -> None:
    user = api.funded_user()
    r = withdraw(api, user, None)
    assert r.status_code == 400 and r.json()["code"] == "idempotency_key_missing"
    assert count(api.engine, "SELECT count(*) FROM withdrawals") == 0
    assert count(api.engine, "SELECT count(*) FROM api_idempotency") == 0
    assert balance(api.engine, f"user:{user}:wallet") == 150_000_000


def test_completed_retry_gets_the_first_response(api: Api) -> None:
    user = api.funded_user()
    first = withdraw(api, user, "k-1")
    again = withdraw(api, user, "k-1")
    assert first.status_code == again.status_code == 201
    assert again.json() == first.json()
    assert again.headers["idempotent-replayed"] == "true"
    assert "idempotent-replayed" not in first.headers
    assert count(api.engine, "SELECT count(*) FROM withdrawals") == 1
    assert balance(api.engine, f"user:{user}:wallet") == 150_000_000 - 32_000_000


def test_same_key_with_another_body_is_422(api: Api) -> None:
    user = api.funded_user()
    assert withdraw(api, user, "k-1").status_code == 201
    first = withdraw(api, user, "k-1").json()  # the replay of the first
    other = withdraw(api, user, "k-1", {**BODY, "amount": "31000000"})
    assert other.status_code == 422 and other.json()["code"] == "idempotency_key_reused"
    # The problem names the request already stored under the key, and what it created.
    stored = other.json()["stored_request"]
    assert (stored["method"], stored["path"]) == ("POST", f"/v1/users/{user}/withdrawals")
    assert stored["operation"] == "withdrawal.create" and stored["state"] == "completed"
    assert stored["resource_id"] == first["id"]
    received = datetime.fromisoformat(stored["received_at"])
    assert abs(received - datetime.fromisoformat(first["requested_at"])) < timedelta(minutes=1)
    assert other.json()["detail"] == (
        f"Idempotency-Key 'k-1' was already used for another request: POST "
        f"/v1/users/{user}/withdrawals at {stored['received_at']} (answered 201, id "
        f"{first['id']}); use a new key for a new request")
    # Keys are per client and operation: another operation may use the same key.
    wid = withdraw(api, user, "k-2").json()["id"]
    cancel = api.call("POST", f"/v1/withdrawals/{wid}/cancel", "acme", idem="k-1", json={})
    assert cancel.status_code == 200
    assert count(api.engine, "SELECT count(*) FROM withdrawals") == 2


def test_retry_while_the_first_runs_is_409_then_the_first_response(api: Api) -> None:
    user = api.funded_user()
    results: dict[str, httpx.Response] = {}
    with api.engine.connect() as blocker:
        # Hold the daily-limit lock of (user, USDC): the first request stops inside the
        # reserve, after claiming its key.
        blocker.execute(sa.text("SELECT pg_advisory_lock(7321, hashtext(:k))"),
                        {"k": f"{user}/USDC"})
        first = threading.Thread(target=lambda: results.update(first=withdraw(api, user, "k")))
        first.start()
        deadline = time.monotonic() + 10
        while count(api.engine, "SELECT count(*) FROM api_idempotency") == 0:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        during = withdraw(api, user, "k")
        assert during.status_code == 409 and during.json()["code"] == "idempotency_in_progress"
        assert first.is_alive()
        blocker.execute(sa.text("SELECT pg_advisory_unlock(7321, hashtext(:k))"),
                        {"k": f"{user}/USDC"})
        blocker.commit()
        first.join(timeout=30)
    assert results["first"].status_code == 201
    after = withdraw(api, user, "k")
    assert (after.status_code, after.json()) == (201, results["first"].json())
    assert count(api.engine, "SELECT count(*) FROM withdrawals") == 1


def test_parallel_identical_requests_reserve_once(api: Api) -> None:
    user = api.funded_user()
    barrier = threading.Barrier(8)

    def send(_: int) -> httpx.Response:
        barrier.wait()
        with httpx.Client(base_url=str(api.http.base_url), timeout=30) as http:
            return http.post(f"/v1/users/{user}/withdrawals", json=BODY,
                             headers=api.headers("acme", "same-key"))

    with ThreadPoolExecutor(8) as pool:
        responses = list(pool.map(send, range(8)))
    statuses = sorted(r.status_code for r in responses)
    assert set(statuses) <= {201, 409} and statuses.count(201) >= 1, statuses
    bodies = {r.text for r in responses if r.status_code == 201}
    assert len(bodies) == 1
    assert count(api.engine, "SELECT count(*) FROM withdrawals") == 1
    assert balance(api.engine, f"user:{user}:wallet") == 150_000_000 - 32_000_000


def test_a_refused_request_releases_its_key(api: Api) -> None:
    user = api.new_user()
    refused = withdraw(api, user, "k")
    assert refused.status_code == 409 and refused.json()["code"] == "insufficient_funds"
    assert count(api.engine, "SELECT count(*) FROM api_idempotency") == 0
    fund(api.engine, [user], 150_000_000)
    assert withdraw(api, user, "k").status_code == 201


def test_admin_reversal_is_replayed_not_posted_twice(api: Api) -> None:
    user = api.funded_user()
    txid = fund_transaction(api, user)
    path = f"/v1/admin/ledger/transactions/{txid}/reversals"
    first = api.call("POST", path, "carol", idem="rev-1", json={"reason": "typo"})
    again = api.call("POST", path, "carol", idem="rev-1", json={"reason": "typo"})
    assert first.status_code == again.status_code == 201 and again.json() == first.json()
    reversals = "SELECT count(*) FROM ledger_transactions WHERE kind = 'reversal'"
    assert count(api.engine, reversals) == 1
    other = api.call("POST", path, "carol", idem="rev-2", json={"reason": "typo"})
    assert other.status_code == 409 and other.json()["code"] == "reversal_exceeds_original"


def test_keys_are_kept_at_least_24_hours(api: Api, owner: Engine) -> None:
    user = api.funded_user()
    assert withdraw(api, user, "old").status_code == 201
    assert withdraw(api, user, "new").status_code == 201
    with UnitOfWork(api.engine) as uow:
        with pytest.raises(ValueError):
            idempotency.cleanup(uow.conn, retention_s=3_600)
        # The database refuses to drop a completed record younger than 24 hours.
        with pytest.raises(sa.exc.DBAPIError):
            uow.conn.execute(sa.text("DELETE FROM api_idempotency WHERE key = 'new'"))
    with owner.begin() as conn:
        conn.execute(sa.text("UPDATE api_idempotency SET created_at = now() - interval '25 hours'"
                             " WHERE key = 'old'"))
    with UnitOfWork(api.engine) as uow:
        assert idempotency.cleanup(uow.conn) == 1
        uow.commit()
    keys = count(api.engine, "SELECT count(*) FROM api_idempotency WHERE key = 'new'")
    assert keys == 1
