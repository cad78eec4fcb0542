"""Deposit use cases against a real database: paging a user's deposits, opening accounts."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from config.chains import parse_chains_config
from config.uow import UnitOfWork
from deposits import service
from ledger import chart
from ledger import service as ledger
from ledger.errors import AccountMismatch
from ledger.model import AccountType

CONFIG = parse_chains_config({
    "assets": {"ETH": {"scale": 18}, "USDC": {"scale": 6}},
    "chains": {"dev": {"chain_id": 31337, "rpc_url": "http://127.0.0.1:1", "finality":
                       "confirmations:3", "native_asset": "ETH"}},
})


def _seed_deposits(engine: Engine, user_id: str, count: int, first: int = 1) -> list[int]:
    with engine.begin() as conn:
        return list(conn.execute(sa.text(
            "INSERT INTO deposits (chain, tx_hash, position, from_address, to_address, value, "
            "user_id, booking, state, last_event_id) "
            "SELECT 'dev', '0x' || lpad(to_hex(n), 64, '0'), 'log:0', '0x1', '0x2', n, :u, "
            "'ignore', 'ignored', 0 FROM generate_series(:f, :f + :n - 1) AS n RETURNING id"),
            {"u": user_id, "f": first, "n": count}).scalars())


class TestUserDeposits:
    def test_keyset_pages_newest_first_without_gaps_or_repeats(self, engine: Engine) -> None:
        ids = _seed_deposits(engine, "alice", 7)
        _seed_deposits(engine, "bob", 3, first=100)
        seen: list[int] = []
        before: int | None = None
        with UnitOfWork(engine) as uow:
            while True:
                page = service.user_deposits(uow, "alice", limit=3, before_id=before)
                if not page:
                    break
                assert len(page) <= 3
                seen += [d.id for d in page]
                before = page[-1].id
        assert seen == sorted(ids, reverse=True)

    def test_default_is_the_newest_page(self, engine: Engine) -> None:
        ids = _seed_deposits(engine, "alice", 5)
        with UnitOfWork(engine) as uow:
            assert [d.id for d in service.user_deposits(uow, "alice", limit=2)] == \
                sorted(ids, reverse=True)[:2]
            assert service.user_deposits(uow, "alice", limit=2, before_id=min(ids)) == []
            with pytest.raises(ValueError, match="limit"):
                service.user_deposits(uow, "alice", limit=0)


class TestAccountCache:
    def test_opens_many_in_one_go_with_balance_rows_and_replays(self, engine: Engine) -> None:
        needed = [(chart.custody("dev"), "USDC")] + [
            (chart.user_wallet(f"u{i}"), "USDC") for i in range(50)]
        cache = service.AccountCache()
        with UnitOfWork(engine) as uow:
            assert cache.ensure(uow, CONFIG, needed + needed[:3])
            assert not cache.ensure(uow, CONFIG, needed)
            uow.commit()
        fresh = service.AccountCache()
        with UnitOfWork(engine) as uow:
            fresh.ensure(uow, CONFIG, needed)  # Already there: found, not duplicated.
            for spec, asset in needed:
                account = ledger.get_account(uow, spec.code, asset)
                assert fresh.get(spec.code, asset) == cache.get(spec.code, asset) == account
                assert ledger.account_balance(uow, account).balance_minor == 0
            count = uow.conn.execute(sa.text("SELECT count(*) FROM accounts")).scalar_one()
        assert count == len(needed)

    def test_existing_account_with_other_flags_is_refused(self, engine: Engine) -> None:
        with UnitOfWork(engine) as uow:
            usdc = ledger.open_asset(uow, "USDC", 6)
            ledger.open_account(uow, chart.AccountSpec("user:eve:wallet", AccountType.ASSET),
                                usdc)
            uow.commit()
        with UnitOfWork(engine) as uow, pytest.raises(AccountMismatch):
            service.AccountCache().ensure(uow, CONFIG, [(chart.user_wallet("eve"), "USDC")])
