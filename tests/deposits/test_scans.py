"""Recording a scan: the plan of its new deposits (pure) and the transaction that uses it, or
plans again when what the plan assumed no longer holds (a real database, no node)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from chains.model import BlockHeader, ObservedTransfer, parse_finality_rule
from config.chains import parse_chains_config
from config.uow import UnitOfWork
from deposits import repository as repo
from deposits import scans, service
from deposits.attestors import Attestation, Verdict
from deposits.scanner import Observation
from ledger.integrity import verify

TOKEN = "0x" + "aa" * 20
UNLISTED = "0x" + "bb" * 20
SENDER = "0x" + "11" * 20
NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
CONFIG = parse_chains_config({
    "assets": {"ETH": {"scale": 18}, "USDC": {"scale": 6}},
    "chains": {"dev": {
        "chain_id": 31337, "rpc_url": "http://127.0.0.1:1", "finality": "confirmations:3",
        "native_asset": "ETH",
        "tokens": [{"contract": TOKEN, "symbol": "USDC", "decimals": 6, "asset": "USDC"}]}},
})
CHAIN = CONFIG.chain("dev")
HEAD = 20
HEADERS = [BlockHeader(n, f"0x{n:064x}", f"0x{n - 1:064x}", 0) for n in range(10, HEAD + 1)]


def observation(n: int, *, to: str, block: int, token: str = TOKEN) -> Observation:
    return Observation(ObservedTransfer(
        token=token, from_address=SENDER, to_address=to, value=1_000_000 + n,
        tx_hash=f"0x{n:064x}", block_number=block, block_hash=f"0x{block:064x}",
        position="log:0", log_index=n), tx_from=SENDER, tx_nonce=None)


ADDRESSES = {f"0x{n:040x}": f"user{n}" for n in range(1, 6)}
OBSERVED = [
    observation(1, to="0x" + f"{1:040x}", block=12),  # final, agreed: credited
    observation(2, to="0x" + f"{2:040x}", block=12, token=UNLISTED),  # ignored
    observation(3, to="0x" + f"{3:040x}", block=19),  # 2 confirmations: included only
    observation(4, to="0x" + f"{4:040x}", block=13),  # final, disagreed: final only
    observation(5, to="0x" + f"{5:040x}", block=14),  # final, no verdict: final only
]
FINALITY = scans.ScanFinality(parse_finality_rule("confirmations:3"), HEAD, None)


def attested() -> dict[tuple[str, str, str], Attestation]:
    keys = [scans.key_of(CHAIN, o) for o in OBSERVED]
    return {keys[0]: Attestation(Verdict.AGREED, None, {"attestor": "test"}),
            keys[3]: Attestation(Verdict.DISAGREED, "amount_mismatch", {"attestor": "test"})}


class FakeAccounts(service.AccountCache):
    """Accounts without a database: every account exists (the plan only reads them)."""

    def get(self, code: str, asset_code: str) -> Any:
        from ledger.model import Account, AccountType, Asset
        return Account(id=hash(code) % 1000 + 1, code=code, asset=Asset(2, asset_code, 6),
                       type=AccountType.ASSET)


class TestPlan:
    def plan(self) -> scans.NewDeposits:
        rows = scans.new_rows(CONFIG, CHAIN, OBSERVED, ADDRESSES, head_block=HEAD)
        return scans.plan_new_deposits(
            CHAIN, rows, list(range(101, 106)), list(range(501, 516)), headers=HEADERS,
            finality=FINALITY, credits=scans.ScanCredits(attested(), FakeAccounts()),
            internal=frozenset())

    def test_each_new_deposit_gets_the_history_its_facts_call_for(self) -> None:
        planned = self.plan()
        rows = {r["id"]: r for r in json.loads(planned.rows)}
        events = json.loads(planned.events)
        history: dict[int, list[str]] = {}
        for e in events:
            history.setdefault(e["deposit_id"], []).append(e["event"])
        assert history == {
            101: ["transfer_included", "finality_reached", "attested_for_user"],
            102: ["transfer_ignored"],
            103: ["transfer_included"],
            104: ["transfer_included", "finality_reached"],
            105: ["transfer_included", "finality_reached"],
        }
        assert {i: r["state"] for i, r in rows.items()} == {
            101: "credited", 102: "ignored", 103: "included", 104: "final", 105: "final"}
        # History ids ascending in the order written, the credits' rows after all others.
        assert [e["id"] for e in events] == list(range(501, 501 + len(events)))
        assert events[-1]["event"] == "attested_for_user"
        assert {i: r["last_event_id"] for i, r in rows.items()} == {
            i: max(e["id"] for e in events if e["deposit_id"] == i) for i in rows}
        assert (planned.count, planned.finals, planned.credited) == (5, 3, 1)

    def test_a_credit_names_its_ledger_transaction_by_its_place_and_its_evidence(self) -> None:
        planned = self.plan()
        credited = [e for e in json.loads(planned.events) if e["event"] == "attested_for_user"]
        assert [(e["credit"], e["rule"]) for e in credited] == [(1, "confirmations:3")]
        assert credited[0]["evidence"]["attestation"] == {"attestor": "test"}
        assert credited[0]["evidence"]["confirmations"] == HEAD - 12 + 1
        assert [r["credit"] for r in json.loads(planned.rows) if "credit" in r] == [1]
        assert planned.post is not None
        [entry] = planned.post.entries
        assert entry.idempotency_key == f"deposit:dev:0x{1:064x}:log:0"
        assert entry.metadata["deposit_id"] == 101
        assert [line.amount_minor for line in entry.lines] == [1_000_001, -1_000_001]

    def test_an_internal_transfer_is_not_credited_at_scan(self) -> None:
        rows = scans.new_rows(CONFIG, CHAIN, OBSERVED, ADDRESSES, head_block=HEAD)
        planned = scans.plan_new_deposits(
            CHAIN, rows, list(range(101, 106)), list(range(501, 516)), headers=HEADERS,
            finality=FINALITY, credits=scans.ScanCredits(attested(), FakeAccounts()),
            internal=frozenset({scans.key_of(CHAIN, OBSERVED[0])}))
        assert planned.credited == 0 and planned.post is None

    def test_without_finality_every_deposit_is_only_seen(self) -> None:
        rows = scans.new_rows(CONFIG, CHAIN, OBSERVED, ADDRESSES, head_block=HEAD)
        planned = scans.plan_new_deposits(CHAIN, rows, list(range(1, 6)), list(range(1, 16)),
                                          headers=HEADERS, finality=None, credits=None,
                                          internal=frozenset())
        assert [e["event"] for e in json.loads(planned.events)] == [
            "transfer_included", "transfer_ignored", "transfer_included", "transfer_included",
            "transfer_included"]


def _assign(engine: Engine) -> None:
    with engine.begin() as conn:
        conn.execute(sa.text(
            "INSERT INTO deposit_addresses (family, address, derivation_index, user_id) "
            "SELECT 'evm', a, n, u FROM unnest(CAST(:a AS text[]), CAST(:u AS text[])) "
            "WITH ORDINALITY AS x(a, u, n)"),
            {"a": list(ADDRESSES), "u": list(ADDRESSES.values())})


def _plan_ahead(engine: Engine, accounts: service.AccountCache) -> scans.NewDeposits:
    credits = scans.ScanCredits(attested(), accounts)
    with UnitOfWork(engine) as uow:
        accounts.ensure(uow, CONFIG, service.accounts_needed(
            CHAIN, scans.credit_candidates(CHAIN, scans.new_rows(
                CONFIG, CHAIN, OBSERVED, ADDRESSES, head_block=HEAD), final_height=HEAD - 2)))
        uow.commit()
    with UnitOfWork(engine) as uow:  # Outside the scan's transaction, as the watcher plans.
        return scans.plan_scan(uow, CONFIG, CHAIN, HEADERS, OBSERVED, ADDRESSES,
                               head_block=HEAD, finality=FINALITY, credits=credits)


def _record(engine: Engine, accounts: service.AccountCache,
            planned: scans.NewDeposits | None) -> tuple[int, int, int]:
    with UnitOfWork(engine) as uow:
        counts = scans.record_scan_final(
            uow, CONFIG, CHAIN, HEADERS, OBSERVED, ADDRESSES, head_block=HEAD,
            finality=FINALITY, now=NOW, credits=scans.ScanCredits(attested(), accounts),
            planned=planned)
        uow.commit()
    return counts


def _written(engine: Engine) -> list[tuple[Any, ...]]:
    with engine.connect() as conn:
        return [tuple(r) for r in conn.execute(sa.text(
            "SELECT d.id, d.tx_hash, d.state, d.ledger_transaction_id, "
            "array_agg(e.event ORDER BY e.id), array_agg(e.observed_at ORDER BY e.id) "
            "FROM deposits d JOIN deposit_events e ON e.deposit_id = d.id "
            "GROUP BY d.id ORDER BY d.id"))]


class TestRecordWithAPlan:
    def test_the_plan_made_ahead_is_written_at_the_time_of_the_step(self, engine: Engine) -> None:
        _assign(engine)
        accounts = service.AccountCache()
        planned = _plan_ahead(engine, accounts)
        assert _record(engine, accounts, planned) == (5, 3, 1)
        written = _written(engine)
        # The plan's own ids: it was used, not made again.
        assert [r[0] for r in written] == sorted(json.loads(planned.rows)[i]["id"]
                                                 for i in range(5))
        assert {r[5][0] for r in written} == {NOW}  # observed at the step's time
        [credited] = [r for r in written if r[2] == "credited"]
        with engine.connect() as conn:
            effective = conn.execute(sa.text(
                "SELECT effective_at FROM ledger_transactions WHERE id = :i"),
                {"i": credited[3]}).scalar_one()
        assert effective == NOW
        assert verify(engine).ok

    def test_a_deposit_that_exists_by_then_makes_the_transaction_plan_again(
            self, engine: Engine) -> None:
        _assign(engine)
        accounts = service.AccountCache()
        planned = _plan_ahead(engine, accounts)
        # Before the step's transaction, the first deposit is recorded (another writer, or a
        # rewind left it unconfirmed): the plan's "all new" no longer holds.
        with UnitOfWork(engine) as uow:
            scans.record_scan(uow, CONFIG, CHAIN, [], OBSERVED[:1], ADDRESSES, head_block=HEAD,
                              now=NOW)
            [seen] = repo.lock_deposits(uow.conn, [scans.key_of(CHAIN, OBSERVED[0])]).values()
            service.append_event(uow, seen, service.E.BLOCK_REORGED_OUT, now=NOW)
            uow.commit()
        assert _record(engine, accounts, planned) == (4, 2, 0)
        written = _written(engine)
        assert len(written) == 5  # no deposit twice
        first = [r for r in written if r[1] == f"0x{1:064x}"][0]
        assert first[4] == ["transfer_included", "block_reorged_out", "transfer_reincluded"]
        assert first[2] == "included" and first[3] is None
        planned_ids = {r["id"] for r in json.loads(planned.rows)}
        assert not planned_ids & {r[0] for r in written if r[1] != f"0x{1:064x}"}
        assert verify(engine).ok


def _cursor(engine: Engine) -> list[tuple[int, str]]:
    with UnitOfWork(engine) as uow:
        return repo.get_cursor(uow.conn, CHAIN.name)


class TestRecordPlanned:
    """The pipelined path: the plan's writes and the cursor in one round trip, the database
    checking what the plan assumed."""

    def test_writes_what_record_scan_final_writes(self, engine: Engine) -> None:
        _assign(engine)
        accounts = service.AccountCache()
        planned = _plan_ahead(engine, accounts)
        with UnitOfWork(engine) as uow:
            counts = scans.record_planned(uow, CHAIN, [(planned, HEADERS)], cursor=[], now=NOW)
            uow.commit()
        assert counts == (5, 3, 1)
        written = _written(engine)
        assert [r[2] for r in written] == ["credited", "ignored", "included", "final", "final"]
        [credited] = [r for r in written if r[2] == "credited"]
        assert credited[3] is not None  # named by its idempotency key, in the same pipeline
        assert _cursor(engine)[-1] == (HEAD, HEADERS[-1].hash)
        assert verify(engine).ok

    def test_a_deposit_that_exists_makes_it_stale_and_nothing_is_written(
            self, engine: Engine) -> None:
        _assign(engine)
        accounts = service.AccountCache()
        planned = _plan_ahead(engine, accounts)
        with UnitOfWork(engine) as uow:
            scans.record_scan(uow, CONFIG, CHAIN, [], OBSERVED[3:4], ADDRESSES, head_block=HEAD,
                              now=NOW)
            uow.commit()
        before = _written(engine)
        with pytest.raises(scans.PlanStale, match="exists"), UnitOfWork(engine) as uow:
            scans.record_planned(uow, CHAIN, [(planned, HEADERS)], cursor=[], now=NOW)
        assert _written(engine) == before
        with engine.connect() as conn:
            assert conn.execute(sa.text("SELECT count(*) FROM ledger_transactions")).scalar() \
                == 0
        # The transaction that follows records the scan with what exists.
        assert _record(engine, accounts, planned)[0] == 4
        assert len(_written(engine)) == 5 and verify(engine).ok

    def test_a_cursor_moved_since_it_was_read_makes_it_stale(self, engine: Engine) -> None:
        _assign(engine)
        planned = _plan_ahead(engine, service.AccountCache())
        with UnitOfWork(engine) as uow:
            repo.save_cursor(uow.conn, CHAIN.name, [(9, HEADERS[0].parent_hash)])
            uow.commit()
        with pytest.raises(scans.PlanStale, match="cursor"), UnitOfWork(engine) as uow:
            scans.record_planned(uow, CHAIN, [(planned, HEADERS)], cursor=[], now=NOW)
        assert _written(engine) == []
        assert _cursor(engine) == [(9, HEADERS[0].parent_hash)]

    def test_a_refused_credit_raises_and_nothing_is_written(self, engine: Engine) -> None:
        from ledger import service as ledger_service
        from ledger.errors import PeriodClosed

        _assign(engine)
        planned = _plan_ahead(engine, service.AccountCache())
        closed_until = datetime(2026, 6, 1, tzinfo=UTC)
        with UnitOfWork(engine) as uow:  # A period closes after the step's time.
            ledger_service.close_period(uow, closed_until, closed_by="test")
            uow.commit()
        with pytest.raises(PeriodClosed), UnitOfWork(engine) as uow:
            scans.record_planned(uow, CHAIN, [(planned, HEADERS)], cursor=[],
                                 now=closed_until - timedelta(days=1))
        assert _written(engine) == [] and _cursor(engine) == []
