"""The database refuses what the deposit rules refuse, whatever the code path."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Engine

from chains.addresses import MnemonicAddressSource, XpubAddressSource, xpub_from_mnemonic
from config.uow import UnitOfWork, sqlstate
from deposits import service
from devtools.anvil import DEV_MNEMONIC

TX = "0x" + "ab" * 32


def _seed(engine: Engine) -> None:
    with engine.begin() as conn:
        conn.execute(sa.text(
            "INSERT INTO deposits (chain, tx_hash, position, from_address, to_address, value, "
            "booking, state, last_event_id) VALUES ('dev', :t, 'log:0', '0x1', '0x2', "
            "CAST(:v AS numeric), 'ignore', 'ignored', 0)"), {"t": TX, "v": str(2**200)})
        conn.execute(sa.text(
            "INSERT INTO deposit_events (deposit_id, chain, tx_hash, position, event, state, "
            "observed_at) SELECT id, chain, tx_hash, position, 'transfer_ignored', 'ignored', "
            "now() FROM deposits"))


class TestAppendOnly:
    @pytest.mark.parametrize(("statement", "code"), [
        ("UPDATE deposit_events SET state = 'credited'", "42501"),
        ("DELETE FROM deposit_events", "42501"),
        ("TRUNCATE deposit_events CASCADE", "42501"),
        ("DELETE FROM deposits", "42501"),
        ("UPDATE provider_inbox SET status = 'x'", "42501"),
        ("UPDATE deposit_cases SET kind = 'x'", "42501"),
        # The role may move a deposit's current state, but never its facts.
        ("UPDATE deposits SET value = 1, last_event_id = 5", "P0001"),
    ])
    def test_application_role_may_not(self, engine: Engine, statement: str, code: str) -> None:
        _seed(engine)
        with pytest.raises(sa_exc.DBAPIError) as raised, engine.begin() as conn:
            conn.execute(sa.text(statement))
        assert sqlstate(raised.value) == code

    @pytest.mark.parametrize("statement", [
        "UPDATE deposit_events SET state = 'credited'",
        "DELETE FROM deposit_events",
        "TRUNCATE deposit_events CASCADE",
        "UPDATE deposits SET value = 1",
        "UPDATE deposits SET state = 'credited'",  # A state change without a history row.
    ])
    def test_even_the_owner_is_refused_by_triggers(self, engine: Engine, owner: Engine,
                                                   statement: str) -> None:
        _seed(engine)
        with pytest.raises(sa_exc.DBAPIError) as raised, owner.begin() as conn:
            conn.execute(sa.text(statement))
        assert sqlstate(raised.value) == "P0001"

    def test_uint256_values_round_trip(self, engine: Engine) -> None:
        _seed(engine)
        with engine.connect() as conn:
            value = conn.execute(sa.text("SELECT value FROM deposits")).scalar_one()
        assert int(value) == 2**200


class TestAddresses:
    def test_deterministic_per_family_and_idempotent(self, engine: Engine) -> None:
        source = MnemonicAddressSource(DEV_MNEMONIC, account=1)
        with UnitOfWork(engine) as uow:
            a = service.assign_address(uow, "evm", "alice", source)
            b = service.assign_address(uow, "evm", "bob", source)
            again = service.assign_address(uow, "evm", "alice", source)
            uow.commit()
        assert a == again == source.address_for(0).lower()
        assert b == source.address_for(1).lower()

    def test_xpub_source_gives_the_same_addresses_without_keys(self, engine: Engine) -> None:
        xpub = XpubAddressSource(xpub_from_mnemonic(DEV_MNEMONIC, account=1))
        with UnitOfWork(engine) as uow:
            a = service.assign_address(uow, "evm", "alice", xpub)
            uow.commit()
        assert a == MnemonicAddressSource(DEV_MNEMONIC, account=1).address_for(0).lower()


class TestPositions:
    @pytest.mark.parametrize(("position", "accepted"), [
        ("log:3", True), ("call:0", True), ("call:0.2.1", True),
        ("call:0.", False), ("call:0..1", False), ("log:0.1", False), ("call:0.x", False),
    ])
    def test_call_paths_accepted_malformed_positions_refused(
            self, engine: Engine, position: str, accepted: bool) -> None:
        insert = sa.text(
            "INSERT INTO deposits (chain, tx_hash, position, from_address, to_address, value, "
            "booking, state, last_event_id) VALUES ('dev', :t, :p, '0x1', '0x2', 1, 'ignore', "
            "'ignored', 0)")
        if accepted:
            with engine.begin() as conn:
                conn.execute(insert, {"t": TX, "p": position})
            return
        with pytest.raises(sa_exc.DBAPIError) as raised, engine.begin() as conn:
            conn.execute(insert, {"t": TX, "p": position})
        assert sqlstate(raised.value) == "23514"  # check_violation


class TestReferences:
    """The history's and the deposits' references, checked once per statement (they were
    foreign keys until revision 0034): a missing parent is refused with 23503, as before."""

    @pytest.mark.parametrize("statement", [
        # A history row naming a deposit that does not exist, alone or beside a good one.
        "INSERT INTO deposit_events (deposit_id, chain, tx_hash, position, event, state, "
        "observed_at) VALUES (999999, 'dev', :t, 'log:0', 'transfer_ignored', 'ignored', now())",
        "INSERT INTO deposit_events (deposit_id, chain, tx_hash, position, event, state, "
        "observed_at) SELECT i, 'dev', :t, 'log:0', 'transfer_ignored', 'ignored', now() "
        "FROM (SELECT min(id) FROM deposits UNION ALL SELECT 999999) x(i)",
        # A history row naming a ledger transaction that does not exist.
        "INSERT INTO deposit_events (deposit_id, chain, tx_hash, position, event, state, "
        "ledger_transaction_id, observed_at) SELECT id, chain, tx_hash, position, "
        "'transfer_ignored', 'ignored', 999999, now() FROM deposits",
        # A deposit naming a ledger transaction that does not exist: at insert, at update.
        "INSERT INTO deposits (chain, tx_hash, position, from_address, to_address, value, "
        "booking, state, last_event_id, ledger_transaction_id) VALUES ('dev', :t, 'log:1', "
        "'0x1', '0x2', 1, 'ignore', 'ignored', 0, 999999)",
        "UPDATE deposits SET ledger_transaction_id = 999999, last_event_id = last_event_id + 1",
    ])
    def test_a_missing_parent_is_refused(self, engine: Engine, statement: str) -> None:
        _seed(engine)
        with engine.connect() as conn:
            before = conn.execute(sa.text(
                "SELECT (SELECT count(*) FROM deposit_events), (SELECT count(*) FROM deposits), "
                "(SELECT count(*) FROM deposits WHERE ledger_transaction_id IS NOT NULL)")).one()
        with pytest.raises(sa_exc.DBAPIError) as raised, engine.begin() as conn:
            conn.execute(sa.text(statement), {"t": TX})
        assert sqlstate(raised.value) == "23503"  # foreign_key_violation
        with engine.connect() as conn:
            after = conn.execute(sa.text(
                "SELECT (SELECT count(*) FROM deposit_events), (SELECT count(*) FROM deposits), "
                "(SELECT count(*) FROM deposits WHERE ledger_transaction_id IS NOT NULL)")).one()
        assert after == before

    def test_existing_parents_are_accepted(self, engine: Engine) -> None:
        _seed(engine)
        with engine.begin() as conn:
            conn.execute(sa.text(
                "INSERT INTO deposit_events (deposit_id, chain, tx_hash, position, event, state, "
                "observed_at) SELECT id, chain, tx_hash, position, 'transfer_ignored', "
                "'ignored', now() FROM deposits"))
            count = conn.execute(sa.text("SELECT count(*) FROM deposit_events")).scalar()
        assert count == 2


class TestPatternChecks:
    """The pattern checks of the rows a credited deposit writes (revision 0034: a length check
    instead of a counted repetition) accept exactly what the counted patterns accepted."""

    # (constraint, its expression on x as written now, the counted pattern it replaced)
    CHECKS = [
        ("deposits_tx_hash_check", "x ~ '^0x[0-9a-f]+$' AND length(x) = 66",
         "^0x[0-9a-f]{64}$"),
        ("deposits_token_check", "x ~ '^0x[0-9a-f]+$' AND length(x) = 42", "^0x[0-9a-f]{40}$"),
        ("outbox_events_event_id_check", "x ~ '^evt_[a-z0-9_]+$' AND length(x) <= 124",
         "^evt_[a-z0-9_]{1,120}$"),
        ("outbox_events_type_check", "x ~ '^(deposit|withdrawal|alert|allowlist)\\.[a-z_]+$' "
         "AND length(split_part(x, '.', 2)) <= 40",
         "^(deposit|withdrawal|alert|allowlist)\\.[a-z_]{1,40}$"),
        ("ledger_transactions_fingerprint_check", "x ~ '^[0-9a-f]+$' AND length(x) = 64",
         "^[0-9a-f]{64}$"),
    ]

    @staticmethod
    def samples() -> list[str]:
        hexes = ["0" * n for n in (39, 40, 41, 63, 64, 65)] + ["a" * 64, "f" * 40]
        words = ["seen", "a" * 39, "a" * 40, "a" * 41, "_", ""]
        found = [p + h for p in ("0x", "0X", "", "x") for h in hexes]
        found += [h[:-1] + c for h in ("0" * 64, "0" * 40) for c in ("g", "A", "\n", " ")]
        found += ["0x" + "0" * 64 + "\n", "\n0x" + "0" * 64]
        found += [f"evt_{w}" for w in words] + ["evt_" + "a" * 120, "evt_" + "a" * 121,
                                                "evt_dep_12", "evt_DEP", "ev_dep_1"]
        found += [f"{k}.{w}" for k in ("deposit", "withdrawal", "alert", "allowlist", "other")
                  for w in words] + ["deposit.seen.x", "deposit.", "deposit.Seen"]
        return found

    def test_each_accepts_what_its_counted_pattern_accepted(self, engine: Engine) -> None:
        with engine.connect() as conn:
            definitions: dict[str, str] = dict(conn.execute(sa.text(
                "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint "
                "WHERE conname = ANY(:n)"), {"n": [c[0] for c in self.CHECKS]}).all())
            for name, expression, pattern in self.CHECKS:
                column = {"deposits_tx_hash_check": "tx_hash", "deposits_token_check": "token",
                          "outbox_events_event_id_check": "event_id",
                          "outbox_events_type_check": "type",
                          "ledger_transactions_fingerprint_check": "fingerprint"}[name]
                # The expression tested below is the one the database enforces.
                assert _plain(definitions[name].replace(column, "x")) == _plain(
                    f"CHECK ({expression})"), definitions[name]
                rows = conn.execute(sa.text(
                    f"SELECT x, coalesce({expression}, false) AS now, x ~ :p AS counted "
                    "FROM unnest(CAST(:xs AS text[])) AS x"),
                    {"p": pattern, "xs": self.samples()}).all()
                differing = [r.x for r in rows if r.now != r.counted]
                assert differing == [], (name, differing)
                assert any(r.now for r in rows), name  # the samples reach both sides


def _plain(check: str) -> str:
    """A check's text without casts to text, parentheses and spaces."""
    return "".join(ch for ch in check.replace("::text", "") if ch not in "() ")
