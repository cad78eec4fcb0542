"""One table of cases judged by both single-entry write paths (issue #11, "Rules live once").

``ledger_post_one`` and ``ledger_post_arrays`` (migrations/sql/functions/) both take an entry
without reversals or closings, and both run as the writer role the guard triggers skip: each
enforces the ledger's rules itself. So that they can never judge differently, every case below
names ONE expected verdict (a status the function returns, or the SQLSTATE it raises), and the
test runs every case through both functions and holds each to that verdict and to the same
effect on the database: the entry's transaction and postings written with the balances moved by
its lines (``posted``), or nothing changed at all (every other verdict).

A case sets up its own small book on a fresh database: the chart below (both flags, no flag,
two assets), prior entries written as raw SQL by the owner through the guard triggers (so the
book does not depend on either function under test), optionally a closed period, and optionally
a transaction already stored under the case's key. Everything here is raw SQL against the
functions' signatures, independent of the Python ledger package.

A case states the verdict DESIGN.md (section 4) calls for: a function that judged otherwise
would fail it. (The table found three such differences when it was written; both functions
were mended to agree.)
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

FP_A = "a" * 64
FP_B = "b" * 64
SEED_AT = "2024-06-01T00:00:00+00:00"
CLOSE_AT = "2025-01-01T00:00:00+00:00"  # end of the closed period, when a case closes one
CLOSED_AT = "2024-12-01T00:00:00+00:00"  # inside the closed period
OPEN_AT = "2025-06-01T00:00:00+00:00"  # after it (and the default effective time)
MAX = 2**127 - 1  # the largest amount and balance of the signed 128-bit range
MISSING_ID = 987_654_321  # an account id no account has

# The chart every case starts from: name -> (asset, type, debits_must_not_exceed_credits,
# credits_must_not_exceed_debits).
CHART: dict[str, tuple[str, str, bool, bool]] = {
    "custody": ("USDC", "asset", False, True),
    "wallet": ("USDC", "liability", True, False),
    "equity": ("USDC", "equity", False, False),
    "fees": ("USDC", "revenue", False, False),
    "custody_eth": ("ETH", "asset", False, True),
    "equity_eth": ("ETH", "equity", False, False),
}
ASSETS = {"USDC": 6, "ETH": 18}

Amount = int | Decimal | None
# A line: (account name, asset code, signed amount); None names a NULL element, and the
# account "missing" an id that no account has.
Line = tuple[str | None, str | None, Amount]

STATUSES = frozenset({"posted", "replayed", "conflict", "period_closed", "not_out_of_period",
                      "insufficient_funds", "balance_out_of_range"})


@dataclass(frozen=True)
class Prior:
    """An entry already in the ledger before the case's entry (its key is stored)."""

    key: str
    lines: tuple[Line, ...]
    fp: str = FP_A


def deposit(amount: int, key: str = "prior-deposit") -> Prior:
    """A prior deposit: custody debited, the wallet credited (its spendable money)."""
    return Prior(key, (("custody", "USDC", amount), ("wallet", "USDC", -amount)))


@dataclass(frozen=True)
class Case:
    """One entry, the book it meets, and the verdict both functions must reach."""

    name: str
    lines: tuple[Line, ...]
    # A status of the functions, or the SQLSTATE of the error they raise.
    verdict: str
    prior: tuple[Prior, ...] = ()
    closed: bool = False  # a period closed through CLOSE_AT
    key: str | None = "k1"
    fp: str | None = FP_A
    eff: str | None = OPEN_AT
    oop: bool | None = False
    # How the line arrays are malformed, if they are (see line_arrays).
    shape: str | None = None
    chart: dict[str, tuple[str, str, bool, bool]] = field(default_factory=lambda: CHART)


TRANSFER: tuple[Line, ...] = (("custody", "USDC", 5), ("equity", "USDC", -5))
STORED = Prior("k1", TRANSFER)  # a transaction stored under the cases' key k1, fingerprint A
NEAR_MAX = (Prior("prior-max-1", (("custody", "USDC", MAX), ("equity", "USDC", -MAX))),
            Prior("prior-max-2", (("fees", "USDC", MAX), ("wallet", "USDC", -MAX))))

CASES: tuple[Case, ...] = (
    # -- Shape of the entry: balance per asset, lines, amounts, accounts.
    Case("balanced_transfer", (("custody", "USDC", 40), ("wallet", "USDC", -40)), "posted",
         prior=(deposit(100),)),
    Case("unbalanced_per_asset", (("custody", "USDC", 40), ("equity", "USDC", -39)), "23514"),
    Case("balanced_in_total_not_per_asset",
         (("custody", "USDC", 40), ("equity_eth", "ETH", -40)), "23514"),
    Case("unbalanced_three_lines_two_assets",
         (("custody", "USDC", 40), ("equity", "USDC", -20), ("equity_eth", "ETH", -20)),
         "23514"),
    Case("one_line", (("custody", "USDC", 5),), "23514"),
    # No postings is what the deferred trigger refuses for every other writer (check_violation,
    # "has no postings"), as ledger_post_arrays does ("has no lines").
    Case("zero_lines", (), "23514"),
    Case("zero_amount_two_lines", (("custody", "USDC", 0), ("equity", "USDC", 0)), "23514"),
    Case("zero_amount_among_others",
         (("custody", "USDC", 5), ("equity", "USDC", -5), ("fees", "USDC", 0)), "23514"),
    Case("fractional_amount",
         (("custody", "USDC", Decimal("1.5")), ("equity", "USDC", Decimal("-1.5"))), "23514"),
    Case("fingerprint_not_hex", TRANSFER, "23514", fp="not-a-fingerprint"),
    Case("unknown_account", (("custody", "USDC", 40), ("missing", "USDC", -40)), "23503"),
    Case("account_in_another_asset", (("custody", "ETH", 40), ("equity_eth", "ETH", -40)),
         "23503"),
    Case("account_in_another_asset_three_lines",
         (("custody", "ETH", 40), ("equity_eth", "ETH", -30), ("equity_eth", "ETH", -10)),
         "23503"),
    Case("account_in_two_assets",
         (("custody", "USDC", 40), ("equity", "USDC", -40), ("custody", "ETH", 5),
          ("equity_eth", "ETH", -5)), "23503"),
    Case("several_assets",
         (("custody", "USDC", 5), ("equity", "USDC", -5), ("custody_eth", "ETH", 7),
          ("equity_eth", "ETH", -7)), "posted"),
    Case("repeated_account",
         (("custody", "USDC", 30), ("equity", "USDC", -10), ("equity", "USDC", -20)), "posted"),
    Case("same_account_both_sides", (("equity", "USDC", 5), ("equity", "USDC", -5)), "posted"),
    # -- Funds: the flags and the 128-bit range, judged on each account's net.
    Case("wallet_overdraft", (("wallet", "USDC", 101), ("equity", "USDC", -101)),
         "insufficient_funds", prior=(deposit(100),)),
    Case("wallet_exactly_to_zero", (("wallet", "USDC", 100), ("equity", "USDC", -100)),
         "posted", prior=(deposit(100),)),
    Case("empty_wallet_overdraft", (("wallet", "USDC", 1), ("equity", "USDC", -1)),
         "insufficient_funds"),
    Case("custody_overdraft", (("equity", "USDC", 101), ("custody", "USDC", -101)),
         "insufficient_funds", prior=(deposit(100),)),
    Case("custody_exactly_to_zero", (("equity", "USDC", 100), ("custody", "USDC", -100)),
         "posted", prior=(deposit(100),)),
    Case("repeated_account_nets_within_funds",
         (("wallet", "USDC", 150), ("equity", "USDC", -150), ("wallet", "USDC", -60),
          ("equity", "USDC", 60)), "posted", prior=(deposit(100),)),
    Case("repeated_account_nets_beyond_funds",
         (("wallet", "USDC", 60), ("equity", "USDC", -60), ("wallet", "USDC", 60),
          ("equity", "USDC", -60)), "insufficient_funds", prior=(deposit(100),)),
    Case("max_128_bit_amount", (("custody", "USDC", MAX), ("equity", "USDC", -MAX)), "posted"),
    Case("amount_beyond_128_bit",
         (("custody", "USDC", MAX + 1), ("equity", "USDC", -MAX - 1)), "balance_out_of_range"),
    Case("balance_pushed_beyond_128_bit", (("custody", "USDC", 1), ("fees", "USDC", -1)),
         "balance_out_of_range", prior=NEAR_MAX),
    Case("balance_pushed_below_128_bit", (("equity", "USDC", -1), ("wallet", "USDC", 1)),
         "balance_out_of_range", prior=NEAR_MAX),
    # Both balances land in range (1 and -1), but no posting can hold 2^127.
    Case("amount_beyond_128_bit_balances_in_range",
         (("equity", "USDC", MAX + 1), ("fees", "USDC", -MAX - 1)), "23514", prior=NEAR_MAX),
    Case("out_of_range_and_insufficient",
         (("custody", "USDC", 1), ("fees", "USDC", -1), ("wallet", "USDC", 1),
          ("equity", "USDC", -1)), "balance_out_of_range", prior=NEAR_MAX),
    # -- Idempotency: the stored key is judged before the period and the funds.
    Case("replay", TRANSFER, "replayed", prior=(STORED,)),
    Case("replay_after_the_funds_are_gone", (("wallet", "USDC", 100), ("equity", "USDC", -100)),
         "replayed",
         prior=(deposit(100), Prior("k1", (("wallet", "USDC", 100), ("equity", "USDC", -100))))),
    Case("conflict", TRANSFER, "conflict", prior=(STORED,), fp=FP_B),
    Case("conflict_with_insufficient_funds", (("wallet", "USDC", 1), ("equity", "USDC", -1)),
         "conflict", prior=(STORED,), fp=FP_B),
    Case("conflict_in_closed_period", TRANSFER, "conflict", prior=(STORED,), fp=FP_B,
         closed=True, eff=CLOSED_AT),
    Case("conflict_unbalanced", (("custody", "USDC", 5), ("equity", "USDC", -4)), "23514",
         prior=(STORED,), fp=FP_B),
    # A request naming an account that does not exist (in the line's asset) is malformed
    # whatever the ledger holds, as an unbalanced one is: refused before the key is judged.
    Case("conflict_with_unknown_account", (("custody", "USDC", 5), ("missing", "USDC", -5)),
         "23503", prior=(STORED,), fp=FP_B),
    Case("conflict_with_account_in_another_asset",
         (("custody", "ETH", 5), ("equity_eth", "ETH", -5)), "23503", prior=(STORED,), fp=FP_B),
    Case("conflict_with_account_in_two_assets",
         (("custody", "USDC", 5), ("equity", "USDC", -5), ("custody", "ETH", 5),
          ("equity_eth", "ETH", -5)), "23503", prior=(STORED,), fp=FP_B),
    Case("replay_fingerprint_with_unknown_account",
         (("custody", "USDC", 5), ("missing", "USDC", -5)), "23503", prior=(STORED,)),
    # -- Periods.
    Case("closed_period", TRANSFER, "period_closed", closed=True, eff=CLOSED_AT),
    Case("closed_period_out_of_period_adjustment", TRANSFER, "posted", closed=True,
         eff=CLOSED_AT, oop=True),
    Case("effective_at_the_close", TRANSFER, "posted", closed=True, eff=CLOSE_AT),
    Case("out_of_period_at_the_close", TRANSFER, "not_out_of_period", closed=True, eff=CLOSE_AT,
         oop=True),
    Case("out_of_period_after_the_close", TRANSFER, "not_out_of_period", closed=True, oop=True),
    Case("out_of_period_without_a_closed_period", TRANSFER, "not_out_of_period", oop=True),
    Case("closed_period_and_insufficient_funds", (("wallet", "USDC", 1), ("equity", "USDC", -1)),
         "period_closed", closed=True, eff=CLOSED_AT),
    Case("closed_period_and_unknown_account", (("custody", "USDC", 5), ("missing", "USDC", -5)),
         "23503", closed=True, eff=CLOSED_AT),
    # -- Malformed requests: NULLs and array shapes (invalid_parameter_value). A NULL where a
    # function reads a value is a malformed argument, as a NULL out-of-period flag is for both:
    # refused up front, not left to whichever later statement trips over it (a NOT NULL
    # column, an array subscript, a comparison that makes a NULL fingerprint a 'conflict').
    Case("null_key", TRANSFER, "22023", key=None),
    Case("null_fingerprint", TRANSFER, "22023", fp=None),
    Case("null_fingerprint_with_stored_key", TRANSFER, "22023", fp=None, prior=(STORED,)),
    Case("null_effective_at", TRANSFER, "22023", eff=None),
    Case("null_out_of_period_flag", TRANSFER, "22023", oop=None),
    Case("null_account", (("custody", "USDC", 5), (None, "USDC", -5)), "22023"),
    Case("null_asset", (("custody", "USDC", 5), ("equity", None, -5)), "22023"),
    Case("null_assets_balanced", (("custody", None, 5), ("equity", None, -5)), "22023"),
    Case("null_amount", (("custody", "USDC", 5), ("equity", "USDC", -5), ("fees", "USDC", None)),
         "22023"),
    Case("amounts_numbered_from_0", TRANSFER, "22023", shape="amounts_from_0"),
    Case("accounts_numbered_from_0", TRANSFER, "22023", shape="accounts_from_0"),
    Case("assets_numbered_from_0", (("custody", "USDC", 5), ("custody_eth", "USDC", -5)),
         "22023", shape="assets_from_0"),
    Case("amounts_array_short", TRANSFER, "22023", shape="amounts_short"),
    Case("accounts_array_short", TRANSFER, "22023", shape="accounts_short"),
    Case("assets_array_long", TRANSFER, "22023", shape="assets_long"),
    Case("amounts_two_dimensions", TRANSFER, "22023", shape="amounts_two_dims"),
)

PATHS = ("ledger_post_one", "ledger_post_arrays")


# ---------------------------------------------------------------------------------------------
# The book.


@dataclass
class Book:
    """Ids of the case's assets and accounts, and the transaction stored under each prior key."""

    assets: dict[str, int]
    accounts: dict[str, int]
    stored: dict[str, int]

    def account(self, name: str | None) -> int | None:
        if name is None:
            return None
        return MISSING_ID if name == "missing" else self.accounts[name]

    def asset(self, code: str | None) -> int | None:
        return None if code is None else self.assets[code]


def open_book(owner: Engine, case: Case) -> Book:
    """The case's chart, prior entries and closed period, written by the owner (raw SQL)."""
    with owner.begin() as conn:
        assets = {code: int(conn.execute(sa.text(
            "INSERT INTO assets (code, scale) VALUES (:c, :s) RETURNING id"),
            {"c": code, "s": scale}).scalar_one()) for code, scale in ASSETS.items()}
        accounts = {name: int(conn.execute(sa.text(
            "INSERT INTO accounts (code, asset_id, type, debits_must_not_exceed_credits, "
            "credits_must_not_exceed_debits) VALUES (:c, :a, :t, :d, :k) RETURNING id"),
            {"c": name, "a": assets[asset], "t": kind, "d": dnec, "k": cned}).scalar_one())
            for name, (asset, kind, dnec, cned) in case.chart.items()}
    book = Book(assets, accounts, {})
    for prior in case.prior:
        # One database transaction per prior entry: the guard triggers (balance per asset at
        # commit, account in asset, period) judge it as they judge any raw writer.
        with owner.begin() as conn:
            book.stored[prior.key] = write_prior(conn, book, prior)
    if case.closed:
        with owner.begin() as conn:
            conn.execute(sa.text(
                "INSERT INTO ledger_periods (ends_at, closed_by) VALUES (:e, 'tests')"),
                {"e": CLOSE_AT})
    return book


def write_prior(conn: Connection, book: Book, prior: Prior) -> int:
    """Insert the prior entry's transaction and postings and move its balance rows."""
    txn = int(conn.execute(sa.text(
        "INSERT INTO ledger_transactions (idempotency_key, fingerprint, kind, effective_at, "
        "source) VALUES (:k, :f, 'prior', :e, 'tests') RETURNING id"),
        {"k": prior.key, "f": prior.fp, "e": SEED_AT}).scalar_one())
    net: Counter[int] = Counter()
    for no, (name, code, amount) in enumerate(prior.lines, start=1):
        account = book.account(name)
        assert account is not None and amount is not None
        conn.execute(sa.text(
            "INSERT INTO ledger_postings (transaction_id, line_no, account_id, asset_id, amount) "
            "VALUES (:t, :n, :a, :s, :m)"),
            {"t": txn, "n": no, "a": account, "s": book.asset(code), "m": amount})
        net[account] += int(amount)
    for account, delta in sorted(net.items()):
        conn.execute(sa.text(
            "UPDATE account_balances SET balance = balance + :d, version = version + 1 "
            "WHERE account_id = :a"), {"a": account, "d": delta})
    return txn


# ---------------------------------------------------------------------------------------------
# The two calls, as the application role, with the same entry.


def line_arrays(book: Book, case: Case) -> tuple[Any, Any, Any]:
    """The entry's accounts, assets and amounts as the functions take them, malformed as the
    case's shape says (array literals for the ones numbered from another index)."""
    acc: list[Any] = [book.account(a) for a, _, _ in case.lines]
    asset: list[Any] = [book.asset(s) for _, s, _ in case.lines]
    amt: list[Any] = [None if m is None else str(m) for _, _, m in case.lines]

    def from_0(values: list[Any]) -> str:
        return f"[0:{len(values) - 1}]={{{','.join(str(v) for v in values)}}}"

    if case.shape is None:
        return acc, asset, amt
    shapes: dict[str, Callable[[], tuple[Any, Any, Any]]] = {
        "accounts_from_0": lambda: (from_0(acc), asset, amt),
        "assets_from_0": lambda: (acc, from_0(asset), amt),
        "amounts_from_0": lambda: (acc, asset, from_0(amt)),
        "accounts_short": lambda: (acc[:-1], asset, amt),
        "assets_long": lambda: (acc, [*asset, asset[0]], amt),
        "amounts_short": lambda: (acc, asset, amt[:-1]),
        "amounts_two_dims": lambda: (acc, asset, [[m] for m in amt]),
    }
    return shapes[case.shape]()


def metadata(case: Case) -> str:
    return json.dumps({"case": case.name})


def post_one(conn: Connection, book: Book, case: Case) -> tuple[str, int | None]:
    acc, asset, amt = line_arrays(book, case)
    rows = conn.exec_driver_sql(
        "SELECT status, transaction_id FROM ledger_post_one(%s, %s, 'case', 'ref-1', "
        "%s::timestamptz, 'reason', 'tests', %s, %s::jsonb, %s::bigint[], %s::int[], "
        "%s::numeric[])",
        (case.key, case.fp, case.eff, case.oop, metadata(case), acc, asset, amt)).all()
    assert len(rows) == 1, rows
    return str(rows[0][0]), rows[0][1]


def post_arrays(conn: Connection, book: Book, case: Case) -> tuple[str, int | None]:
    acc, asset, amt = line_arrays(book, case)
    n = len(case.lines)
    rows = conn.exec_driver_sql(
        "SELECT item, status, transaction_id FROM ledger_post_arrays(%s::text[], %s::text[], "
        "%s::text[], %s::text[], %s::timestamptz[], %s::text[], %s::text[], %s::bigint[], "
        "%s::boolean[], %s::jsonb[], %s::int[], %s::bigint[], %s::int[], %s::numeric[], "
        "%s::bigint[], %s::bigint[])",
        ([case.key], [case.fp], ["case"], ["ref-1"], [case.eff], ["reason"], ["tests"], [None],
         [case.oop], [metadata(case)], [n], acc, asset, amt, [None] * n, [None] * n)).all()
    assert len(rows) == 1 and rows[0][0] == 1, rows
    return str(rows[0][1]), rows[0][2]


CALLS = {"ledger_post_one": post_one, "ledger_post_arrays": post_arrays}


def judge(engine: Engine, path: str, book: Book, case: Case) -> tuple[str, int | None]:
    """(status, transaction id) as returned, or (SQLSTATE, None) if the call or its commit
    raised."""
    try:
        with engine.begin() as conn:
            return CALLS[path](conn, book, case)
    except sa.exc.DBAPIError as exc:
        return str(getattr(exc.orig, "sqlstate", None)), None


# ---------------------------------------------------------------------------------------------
# What the database holds.


@dataclass(frozen=True)
class State:
    transactions: dict[int, tuple[Any, ...]]
    postings: list[tuple[Any, ...]]
    balances: dict[int, tuple[int, int]]


def state(engine: Engine) -> State:
    with engine.connect() as conn:
        transactions = {int(r[0]): tuple(r[1:]) for r in conn.execute(sa.text(
            "SELECT id, idempotency_key, fingerprint, kind, reference, effective_at, reason, "
            "source, reverses_transaction_id, out_of_period, metadata "
            "FROM ledger_transactions ORDER BY id"))}
        postings = [tuple(r) for r in conn.execute(sa.text(
            "SELECT transaction_id, line_no, account_id, asset_id, amount, closes_posting_id, "
            "reverses_posting_id FROM ledger_postings ORDER BY transaction_id, line_no"))]
        balances = {int(r[0]): (int(r[1]), int(r[2])) for r in conn.execute(sa.text(
            "SELECT account_id, balance, version FROM account_balances"))}
    return State(transactions, postings, balances)


def expected_state(engine: Engine, before: State, book: Book, case: Case, txn: int) -> State:
    """``before`` with the case's entry posted as transaction ``txn``."""
    with engine.connect() as conn:
        # The request's own values, as the database reads them.
        eff, meta = conn.execute(sa.text("SELECT CAST(:e AS timestamptz), CAST(:m AS jsonb)"),
                                 {"e": case.eff, "m": metadata(case)}).one()
    row = (case.key, case.fp, "case", "ref-1", eff, "reason", "tests", None, case.oop, meta)
    postings = [(txn, no, book.account(a), book.asset(s), m, None, None)
                for no, (a, s, m) in enumerate(case.lines, start=1)]
    balances = dict(before.balances)
    touched: Counter[int] = Counter()
    for a, _, m in case.lines:
        account = book.account(a)
        assert account is not None and m is not None
        touched[account] += int(m)
    for account, delta in touched.items():
        balance, version = balances[account]
        # One version per transaction that touched the row, even at a net of zero.
        balances[account] = (balance + delta, version + 1)
    return State({**before.transactions, txn: row}, sorted(before.postings + postings), balances)


# ---------------------------------------------------------------------------------------------
# The test.


def test_the_table_is_well_formed() -> None:
    names = [case.name for case in CASES]
    assert len(names) == len(set(names))
    for case in CASES:
        assert case.verdict in STATUSES or (len(case.verdict) == 5 and case.verdict.isalnum()), (
            case.name)


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
@pytest.mark.parametrize("path", PATHS)
def test_same_verdict_and_effect(engine: Engine, owner: Engine, path: str, case: Case) -> None:
    book = open_book(owner, case)
    before = state(engine)

    verdict, txn = judge(engine, path, book, case)

    after = state(engine)
    assert verdict == case.verdict, (
        f"{path} judged {case.name!r} {verdict}, transaction {txn}, "
        f"{'wrote' if after != before else 'nothing written'}")
    if verdict == "posted":
        assert txn is not None and txn not in before.transactions
        assert after == expected_state(engine, before, book, case, txn)
        return
    if verdict in ("replayed", "conflict"):
        assert case.key is not None and txn == book.stored[case.key]
    else:
        assert txn is None
    assert after == before, f"{path} changed the database judging {case.name!r} {verdict}"
