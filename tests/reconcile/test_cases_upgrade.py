"""Revision 0021 on a database that has deposit and withdrawal cases already: each becomes a
row of cases (deposit cases keep their ids, a withdrawal case whose id a deposit case holds gets
a new one), open or resolved as it was, and names it in case_id; new cases continue after."""

from __future__ import annotations

import sqlalchemy as sa

import migrations
from config.database import owner_engine
from tests.migrations.test_upgrade import empty_url  # noqa: F401  (fixture)

T = "'2026-12-01T10:00:00Z'"
SEED = [
    "INSERT INTO deposits (id, chain, tx_hash, position, from_address, to_address, value, "
    " asset_code, amount_minor, booking, state, last_event_id) VALUES (1, 'devnet', "
    " '0x' || repeat('ab', 32), 'log:0', '0x01', '0x02', 5, 'USDC', 5, 'user', 'credited', 1)",
    "INSERT INTO deposit_cases (id, kind, deposit_id, expected, observed, opened_at) VALUES "
    f" (1, 'deep_reorg', 1, '{{}}', '{{}}', {T}), "
    f" (2, 'unattributed_own_address', 1, '{{}}', '{{}}', {T})",
    "INSERT INTO deposit_case_resolutions (case_id, resolved_by, reason, outcome, approved_by)"
    " VALUES (2, 'carol', 'owner top-up', 'capital', 'dave')",
    "INSERT INTO withdrawals (id, user_id, request_key, fingerprint, requested_by, chain, "
    " asset_code, destination, amount_minor, fee_max_minor, fee_minor, chain_amount, "
    " approvals_required, state, requested_at, state_changed_at) VALUES (1, 'u1', 'k', "
    " repeat('0', 64), 'u1', 'devnet', 'USDC', '0x' || repeat('03', 20), 1, 1, 0, 1, 0, "
    f" 'requested', {T}, {T})",
    "INSERT INTO withdrawal_cases (id, withdrawal_id, kind, reason, evidence, opened_by, "
    f" opened_at) VALUES (1, 1, 'ledger_refused', 'r1', '{{}}', 'processor', {T}), "
    f" (7, 1, 'settlement_mismatch', 'r2', '{{}}', 'processor', {T})",
    "INSERT INTO withdrawal_case_resolutions (case_id, resolved_by, reason, resolved_at) "
    f" VALUES (1, 'erin', 'retried', {T})",
]


def test_existing_cases_join_the_table(empty_url: str) -> None:  # noqa: F811
    migrations.upgrade(empty_url, "0018_cold_limits")
    eng = owner_engine(empty_url)
    with eng.begin() as conn:
        for statement in SEED:
            conn.execute(sa.text(statement))
    migrations.upgrade(empty_url)
    with eng.connect() as conn:
        rows = conn.execute(sa.text(
            "SELECT id, type, subject, status, resolved_by, resolution, refs FROM cases "
            "ORDER BY id")).all()
        linked = conn.execute(sa.text(
            "SELECT 'd' || id, case_id FROM deposit_cases UNION ALL "
            "SELECT 'w' || id, case_id FROM withdrawal_cases ORDER BY 1")).all()
    assert [tuple(r[:6]) for r in rows] == [
        (1, "deep_reorg", "deposit:1", "open", None, None),
        (2, "unattributed_own_address", "deposit:1", "resolved", "carol",
         "capital: owner top-up (approved by dave)"),
        (7, "settlement_mismatch", "withdrawal:1", "open", None, None),
        (8, "ledger_refused", "withdrawal:1", "resolved", "erin", "retried"),
    ]
    assert rows[3].refs == {"withdrawal_id": "1", "withdrawal_case_id": "1", "chain": "devnet"}
    assert [tuple(r) for r in linked] == [("d1", 1), ("d2", 2), ("w1", 8), ("w7", 7)]
    with eng.begin() as conn:  # The next case continues after every id in use.
        conn.execute(sa.text(
            "INSERT INTO deposits (id, chain, tx_hash, position, from_address, to_address, "
            " value, booking, state, last_event_id) VALUES (2, 'devnet', '0x' || "
            " repeat('cd', 32), 'log:0', '0x01', '0x02', 5, 'user', 'final', 2)"))
        new = conn.execute(sa.text(
            "INSERT INTO deposit_cases (kind, deposit_id, expected, observed) VALUES "
            "('deep_reorg', 2, '{}', '{}') RETURNING id, case_id")).one()
    assert tuple(new) == (9, 9)
    eng.dispose()
