"""Plain words for what the ledger and the histories record: a statement line's label from its
transaction's kind and the account it moved, and the class a state is shown with."""

from __future__ import annotations

_KINDS = {
    "deposit": "deposit credited",
    "withdrawal_reserve": "withdrawal reserved",
    "withdrawal_release": "withdrawal released (reserve refunded)",
    "withdrawal_return": "returned payout credited",
    "reversal": "reversal",
    "deposit_refund_decided": "refund",
    "treasury_capital_decided": "adjustment",
}


def statement_label(kind: str, account: str, amount_minor: int) -> str:
    """What a statement line is, in words: ``deposit credited``, ``withdrawal reserved``,
    ``sent (amount and fee)``, ``unused fee refunded``, ``refund``, ``reversal``,
    ``adjustment``; a kind the console does not know yet is an adjustment, named."""
    if kind == "withdrawal_settle":
        if account == "withdrawals":
            return "sent (amount and fee)"
        return "unused fee refunded" if amount_minor > 0 else "fee"
    if kind == "withdrawal_reserve" and account == "withdrawals":
        return "withdrawal reserved (held for the payout)"
    if kind == "withdrawal_release" and account == "withdrawals":
        return "withdrawal released (reserve closed)"
    return _KINDS.get(kind, f"adjustment ({kind})")


_GOOD = frozenset({"credited", "settled", "final", "resolved"})
_BAD = frozenset({"failed", "rejected", "reverted", "written_off", "held", "held_for_review",
                  "unknown", "awaiting_write_off", "ignored", "open"})


def state_class(state: str) -> str:
    """The CSS class of a state: ``good``, ``bad`` or ``warn`` (in flight)."""
    if state in _GOOD:
        return "good"
    return "bad" if state in _BAD else "warn"
