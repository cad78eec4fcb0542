"""A long-running process started while no database server can be reached (a failover under
way, a server restarting) waits for one (``config.database.get_engine(wait_s=...)``) instead
of exiting; a server that answers and refuses fails at once."""

from __future__ import annotations

import logging
import socket
import threading
import time

import pytest
import sqlalchemy as sa

from config.database import _engines, get_engine, with_database
from config.errors import DatabaseUnavailable
from config.settings import Settings
from tests.support.pg_proxy import PgCutProxy


def _free_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as s:
        return int(s.getsockname()[1])


def _server(server_url: str) -> tuple[str, int]:
    url = sa.make_url(server_url)
    host = url.query.get("host") or url.host or "localhost"
    assert isinstance(host, str)
    return host, url.port or 5432


def _on_port(database_url: str, port: int) -> str:
    return sa.make_url(database_url).set(
        host="127.0.0.1", port=port, query={"sslmode": "disable"}).render_as_string(
        hide_password=False)


def test_waits_for_a_server_that_comes_up(server_url: str, database_url: str,
                                          caplog: pytest.LogCaptureFixture) -> None:
    port = _free_port()
    proxies: list[PgCutProxy] = []

    def come_up() -> None:
        time.sleep(1.5)
        proxies.append(PgCutProxy(*_server(server_url), port=port))

    url = _on_port(database_url, port)
    threading.Thread(target=come_up, daemon=True).start()
    started = time.monotonic()
    try:
        with caplog.at_level(logging.WARNING, logger="custody.database"):
            engine = get_engine(Settings(database_url=url), wait_s=30)
        waited = time.monotonic() - started
        with engine.connect() as conn:
            assert conn.execute(sa.text("SELECT current_database()")).scalar() == \
                sa.make_url(database_url).database
        assert waited >= 1.0, "it returned before any server listened"
        assert any("trying again" in r.getMessage() for r in caplog.records)
    finally:
        for engine in [e for u, e in list(_engines.items()) if f":{port}/" in u]:
            engine.dispose()
        for proxy in proxies:
            proxy.close()


def test_without_wait_and_for_a_refusing_server_it_fails_at_once(server_url: str) -> None:
    nothing = _on_port(with_database(server_url, "custody"), _free_port())
    started = time.monotonic()
    with pytest.raises(DatabaseUnavailable, match="cannot connect"):
        get_engine(Settings(database_url=nothing))
    # The server answers: the database does not exist. No waiting for that.
    missing = with_database(server_url, "no_such_database")
    with pytest.raises(DatabaseUnavailable, match="no_such_database"):
        get_engine(Settings(database_url=missing), wait_s=30)
    assert time.monotonic() - started < 10


def test_gives_up_after_its_wait(server_url: str) -> None:
    nothing = _on_port(with_database(server_url, "custody"), _free_port())
    started = time.monotonic()
    with pytest.raises(DatabaseUnavailable, match="cannot connect"):
        get_engine(Settings(database_url=nothing), wait_s=2)
    assert 1.0 <= time.monotonic() - started < 10
