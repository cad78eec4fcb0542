"""The chart of accounts (DESIGN.md section 4): codes, types and flags, one set per asset.

Pure: builders return ``AccountSpec`` values; ``service.open_account`` opens them.
"""

from __future__ import annotations

from dataclasses import dataclass

from ledger.model import AccountType

SUSPENSE_UNATTRIBUTED = "suspense:unattributed"
REVENUE_WITHDRAWAL_FEES = "revenue:withdrawal_fees"
EXPENSE_NETWORK_FEES = "expense:network_fees"
EXPENSE_WRITE_OFFS = "expense:write_offs"
EQUITY_OWNER = "equity:owner"
CLEARING_PROVIDER_PREFIX = "clearing:provider:"


@dataclass(frozen=True)
class AccountSpec:
    """What an account is: code, type and flags (its asset is given separately)."""

    code: str
    type: AccountType
    debits_must_not_exceed_credits: bool = False
    credits_must_not_exceed_debits: bool = False


def custody(chain: str) -> AccountSpec:
    """Customer money we hold on ``chain``; can't go below zero."""
    return AccountSpec(f"custody:{chain}", AccountType.ASSET, credits_must_not_exceed_debits=True)


def treasury(chain: str) -> AccountSpec:
    """Company money on ``chain`` (gas float, fee revenue moved out of custody)."""
    return AccountSpec(f"treasury:{chain}", AccountType.ASSET, credits_must_not_exceed_debits=True)


def user_wallet(user_id: str) -> AccountSpec:
    """What the user can spend (available); can't go below zero."""
    return AccountSpec(
        f"user:{user_id}:wallet", AccountType.LIABILITY, debits_must_not_exceed_credits=True
    )


def user_withdrawals(user_id: str) -> AccountSpec:
    """The user's money reserved for withdrawals in flight."""
    return AccountSpec(
        f"user:{user_id}:withdrawals", AccountType.LIABILITY, debits_must_not_exceed_credits=True
    )


def suspense_unattributed() -> AccountSpec:
    """Final deposits we could not attribute to a user."""
    return AccountSpec(SUSPENSE_UNATTRIBUTED, AccountType.LIABILITY)


def revenue_withdrawal_fees() -> AccountSpec:
    """Fees charged to users."""
    return AccountSpec(REVENUE_WITHDRAWAL_FEES, AccountType.REVENUE)


def expense_network_fees() -> AccountSpec:
    """Gas the network actually charged us."""
    return AccountSpec(EXPENSE_NETWORK_FEES, AccountType.EXPENSE)


def expense_write_offs() -> AccountSpec:
    """Losses approved by two admins."""
    return AccountSpec(EXPENSE_WRITE_OFFS, AccountType.EXPENSE)


def equity_owner() -> AccountSpec:
    """Capital that funds the treasury."""
    return AccountSpec(EQUITY_OWNER, AccountType.EQUITY)


def clearing_provider(provider: str) -> AccountSpec:
    """What a custody provider reported and the ledger has booked but not yet attributed to
    anyone (``reconcile.provider``, ``docs/provider-statements.md``): a transfer the provider
    holds that the ledger lacked comes in as ``DR custody:{chain} / CR clearing:provider:{p}``
    (a fix referencing its case) and leaves when attributed (``DR clearing / CR
    user:{id}:wallet`` or suspense); one of ours the provider does not have goes the other way
    (``DR clearing / CR custody``) until it is found or written off. Customer money in custody:
    it counts with the customer liabilities. Zero when everything is explained."""
    return AccountSpec(f"{CLEARING_PROVIDER_PREFIX}{provider}", AccountType.LIABILITY)


def is_custody(code: str) -> bool:
    """Whether ``code`` is a custody account (customer money on a chain)."""
    return code.startswith("custody:")


def is_customer_liability(code: str) -> bool:
    """Whether ``code`` is money owed to customers: wallets, withdrawals in flight, suspense,
    and what a provider's clearing account holds for attribution."""
    if code == SUSPENSE_UNATTRIBUTED or code.startswith(CLEARING_PROVIDER_PREFIX):
        return True
    return code.startswith("user:") and code.endswith((":wallet", ":withdrawals"))
