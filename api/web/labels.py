"""Plain words for what the ledger and the histories record: a statement line's label from its
transaction's kind and the account it moved, the class a state is shown with, and the lines of
the deposit and withdrawal timelines (events, reasons, evidence, ledger transaction kinds)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from deposits.repository import EventRecord as DepositEventRecord

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


# --------------------------------------------------------------------------- the timelines

#: Why a deposit is not simply credited, in words (``deposits.model.Reason``); another reason
#: (a custody record's verdict) is shown as it was recorded.
_DEPOSIT_REASONS = {
    "unsupported_token": "the token is not one we support",
    "fake_token": "a token with a listed symbol but another contract (a fake)",
    "out_of_range": "the amount is out of the range the ledger holds",
    "zero_amount": "the amount is zero",
    "inexact_conversion": "the amount does not convert exactly to the ledger's scale",
    "below_minimum": "below the minimum deposit",
    "unattributed": "no user owns the receiving address",
}


def deposit_reason(reason: str | None) -> str:
    """A deposit's booking reason in words (empty for none)."""
    if not reason:
        return ""
    return _DEPOSIT_REASONS.get(reason, reason)


@dataclass(frozen=True)
class Said:
    """One history line in words: the sentence, the block hash it names (shown in full with
    a copy button) and a detail line (evidence, reason), each possibly empty."""

    text: str
    block_hash: str | None = None
    detail: str = ""


def _plural(n: int | None, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _by_transaction(txid: int | None) -> str:
    return f" by ledger transaction {txid}" if txid is not None else ""


def evidence_words(evidence: Mapping[str, Any], skip: frozenset[str] = frozenset()) -> str:
    """Evidence as ``key: value`` pairs (nested records as ``outer.inner``), in stored order."""
    parts: list[str] = []

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, Mapping):
            for k, v in value.items():
                walk(f"{prefix}.{k}" if prefix else str(k), v)
        elif prefix not in skip:
            parts.append(f"{prefix.replace('_', ' ')}: {value}")

    walk("", evidence)
    return "; ".join(parts)


def _finality(e: DepositEventRecord) -> Said:
    ev = e.evidence
    facts = [f"head block {ev['head_block']}" if "head_block" in ev else "",
             _plural(e.confirmations, "confirmation") if e.confirmations is not None else "",
             f"finalized block {ev['finalized_block']}" if ev.get("finalized_block") else ""]
    rest = evidence_words(ev, frozenset({"rule", "head_block", "finalized_block",
                                         "confirmations", "tx_block", "tx_block_hash"}))
    said = ", ".join(f for f in facts if f)
    return Said(f"final under rule {e.rule or ev.get('rule', '?')} in block {e.block_number}",
                e.block_hash, f"evidence: {said}{'; ' + rest if rest else ''}")


def _attested(evidence: Mapping[str, Any]) -> str:
    """The custody record's verdict of a booking event (its finality is on its own line)."""
    attestation = evidence.get("attestation")
    if isinstance(attestation, Mapping):
        return "custody record: " + evidence_words(attestation)
    return evidence_words(evidence)


def deposit_event_words(e: DepositEventRecord) -> Said:
    """A deposit history row in words: ``seen in block N``, ``reorged out of block N``,
    ``included again in block M``, ``N confirmations``, ``final under rule R`` (with its
    evidence), ``credited by ledger transaction T``, held, failed or ignored and why; an event
    the console does not know is shown by its name with its evidence."""
    ev, txid, why = e.evidence, e.ledger_transaction_id, deposit_reason(e.reason)
    match e.event:
        case "transfer_included":
            return Said(f"seen in block {e.block_number}", e.block_hash,
                        _plural(e.confirmations, "confirmation") + " at the time")
        case "transfer_ignored":
            return Said(f"ignored: {why or 'not creditable'} (seen in block {e.block_number})",
                        e.block_hash)
        case "confirmations_observed":
            return Said(f"{_plural(e.confirmations, 'confirmation')} (block {e.block_number})")
        case "block_reorged_out":
            after = (" after it was booked: a case is open and nothing was reversed"
                     if e.state == "disputed" else ": back to unconfirmed, waiting to land again")
            ancestor = ev.get("ancestor_block")
            return Said(f"reorged out of block {e.block_number}{after}", e.block_hash,
                        f"common ancestor block {ancestor}" if ancestor is not None else "")
        case "transfer_reincluded":
            return Said(f"included again in block {e.block_number}", e.block_hash,
                        _plural(e.confirmations, "confirmation") + " at the time")
        case "finality_reached":
            return _finality(e)
        case "attested_for_user":
            return Said(f"credited to the user{_by_transaction(txid)} (the custody record "
                        "agrees)", detail=_attested(ev))
        case "attested_for_suspense":
            return Said(f"booked to suspense{_by_transaction(txid)}"
                        f"{': ' + why if why else ''}", detail=_attested(ev))
        case "custody_record_disagreed":
            return Said(f"held for review: the custody record disagrees"
                        f"{': ' + why if why else ''}", detail=_attested(ev))
        case "conversion_inexact":
            return Said("held for review: the amount does not convert exactly to the ledger's "
                        "scale", detail=_attested(ev))
        case "provider_completed_early":
            return Said("held for review: the custody provider called it complete before "
                        "finality", detail=evidence_words(ev))
        case "nonce_consumed":
            return Said("failed: the sender's nonce was used by another final transaction",
                        detail=evidence_words(ev))
        case "internal_matched":
            return Said("a movement of ours between our own addresses: nothing posted",
                        detail=evidence_words(ev))
        case "funding_matched":
            return Said(f"a declared treasury funding: booked as company capital"
                        f"{_by_transaction(txid)}", detail=_attested(ev))
        case "own_unattributed":
            return Said(f"to our own address but not declared: booked to suspense"
                        f"{_by_transaction(txid)}, a case is open", detail=_attested(ev))
        case "capital_decided":
            return Said(f"decided company capital by two admins{_by_transaction(txid)}",
                        detail=evidence_words(ev))
    return Said(e.event + _by_transaction(txid),
                detail="; ".join(x for x in (why, evidence_words(ev)) if x))


_WITHDRAWAL_EVENTS = {
    "reserve_posted": "reserved (amount and the most the fee can be)",
    "approval_required": "waits for approval",
    "approval_recorded": "an approval recorded",
    "approvals_completed": "approved (every approval needed is in)",
    "rejected": "rejected (the reserve released)",
    "canceled": "canceled (the reserve released)",
    "nonce_assigned": "nonce and fee caps assigned",
    "attempt_signed": "an attempt signed",
    "send_accepted": "broadcast (the node accepted it)",
    "send_unconfirmed": "sent without an answer: state unknown (the reserve stays)",
    "receipt_observed": "included in a block",
    "reorged_out": "its block was reorged out: back to broadcast",
    "found_pending": "found pending at the node",
    "not_found": "not found at the node",
    "final_succeeded": "settled (final on chain)",
    "final_reverted": "reverted on chain (final)",
    "proven_not_sent": "proven not sent: the reserve released",
    "escalated": "escalated: waits for a two-admin write-off",
    "write_off_voted": "a write-off vote recorded",
    "written_off_as_sent": "written off as sent",
    "written_off_as_not_sent": "written off as not sent",
    "return_linked": "a returned payout linked",
    "closing_signed": "a closing transaction signed (zero-value, same nonce)",
    "nonce_closed": "its nonce closed",
    "gas_float_low": "waits: the treasury cannot pay its gas yet",
    "settlement_held": "held: final on chain but its settlement cannot be posted (a case is open)",
    "hold_lifted": "hold lifted by an admin: settles again",
}


def withdrawal_event_words(event: str) -> str:
    """A withdrawal history row's event in words (an unknown event: its name)."""
    return _WITHDRAWAL_EVENTS.get(event, event)


_TRANSACTIONS = {
    "deposit": "deposit credit",
    "deposit_unattributed": "booked to suspense",
    "withdrawal_reserve": "reserve",
    "withdrawal_settle": "settlement",
    "withdrawal_gas": "gas (network fee, the company's)",
    "withdrawal_release": "release",
    "withdrawal_return": "returned payout",
    "reversal": "reversal",
    "deposit_refund_decided": "refund",
    "treasury_capital_decided": "company capital",
    "treasury_funding": "treasury funding (company capital)",
    "capital": "company capital",
}


def transaction_label(kind: str) -> str:
    """A ledger transaction's kind in words (an unknown kind: its name)."""
    return _TRANSACTIONS.get(kind, kind)
