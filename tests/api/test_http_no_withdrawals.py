"""A configuration with chains but no ``[withdrawals]`` table: the HTTP API starts, serves
users and deposit addresses, and refuses withdrawal requests with ``withdrawals_not_configured``
before writing anything."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from api.app import create_app
from api.auth import create_key
from api.configuration import load_withdrawals_if_present
from config.chains import load_chains_config
from config.errors import ConfigurationInvalid
from devtools.config import dev_config, to_toml
from tests.api.conftest import DEST, Server


def _file(tmp_path: Path, *, withdrawals: bool) -> Path:
    doc = dev_config(xpub=True)
    if not withdrawals:
        del doc["withdrawals"]
    path = tmp_path / "custody.toml"
    path.write_text(to_toml(doc))
    return path


def test_the_api_starts_without_withdrawals_and_refuses_them(tmp_path: Path,
                                                             engine: Engine) -> None:
    path = _file(tmp_path, withdrawals=False)
    chains = load_chains_config(path)
    assert load_withdrawals_if_present(chains, str(path)) is None
    key = create_key(engine, "acme", "client").key
    server = Server(create_app(engine, chains, None))
    try:
        with httpx.Client(base_url=server.url, timeout=30,
                          headers={"Authorization": f"Bearer {key}"}) as http:
            user = http.post("/v1/users", json={})
            assert user.status_code == 201, user.text
            user_id = user.json()["id"]
            address = http.post(f"/v1/users/{user_id}/deposit-addresses",
                                json={"chain": "devnet"})
            assert address.status_code in (200, 201), address.text
            r = http.post(f"/v1/users/{user_id}/withdrawals", headers={"Idempotency-Key": "k1"},
                          json={"asset": "USDC", "chain": "devnet", "to": DEST,
                                "amount": "1000000"})
    finally:
        server.stop()
    assert r.status_code == 409
    assert r.headers["content-type"].startswith("application/problem+json")
    body = r.json()
    assert body["code"] == "withdrawals_not_configured"
    assert "[withdrawals]" in body["detail"]
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM withdrawals")).scalar_one() == 0
        assert conn.execute(sa.text(
            "SELECT count(*) FROM api_idempotency")).scalar_one() == 0


def test_a_withdrawals_table_that_is_there_is_loaded_and_validated(tmp_path: Path) -> None:
    path = _file(tmp_path, withdrawals=True)
    chains = load_chains_config(path)
    wcfg = load_withdrawals_if_present(chains, str(path))
    assert wcfg is not None and "devnet" in wcfg.hot_wallets
    path.write_text(path.read_text().replace('chain = "devnet"', 'chain = "nowhere"'))
    with pytest.raises(ConfigurationInvalid):
        load_withdrawals_if_present(chains, str(path))
