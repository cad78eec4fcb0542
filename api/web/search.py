"""The console's search box: what a text is (a transaction hash, an address, a withdrawal id, a
user id or a client's reference for a user) and where each match lives."""

from __future__ import annotations

import re
from dataclasses import dataclass

from api.auth import USER_ID_PATTERN
from api.repository import console as repo
from config.chains import ChainsConfig
from config.uow import UnitOfWork
from deposits import service as deposits
from deposits.errors import DepositNotFound
from ledger import service as ledger
from withdrawals import service as withdrawals

TX_HASH = re.compile(r"^0x[0-9a-fA-F]{64}$")
ADDRESS = re.compile(r"^0x[0-9a-fA-F]{40}$")
WITHDRAWAL_ID = re.compile(r"^[0-9]{1,18}$")
_USER_ID = re.compile(USER_ID_PATTERN)
MAX_LENGTH = 200
LIMIT = 20


@dataclass(frozen=True)
class Hit:
    """One match: the page it leads to, its label and what it is."""

    href: str
    label: str
    what: str


class SearchInvalid(ValueError):
    """A text that cannot be anything searched for (the message says what would be)."""


def find(uow: UnitOfWork, chains: ChainsConfig, text: str) -> list[Hit]:
    """Every match of ``text`` (stripped), at most ``LIMIT`` users. Any text is also tried as
    a client's reference (references are free text); SearchInvalid for an empty or too long
    text, or for one that matches nothing and cannot be anything else searched for (a
    malformed hash, an address of the wrong length, characters no id has)."""
    q = text.strip()
    if not q or len(q) > MAX_LENGTH:
        raise SearchInvalid(f"type 1 to {MAX_LENGTH} characters")
    hits: list[Hit] = []
    malformed: SearchInvalid | None = None
    if q[:2].lower() == "0x" and TX_HASH.match(q):
        hits = _transaction(uow, chains, q.lower())
    elif q[:2].lower() == "0x" and ADDRESS.match(q):
        hits = _address(uow, chains, q)
    elif q[:2].lower() == "0x":
        malformed = SearchInvalid(
            f"{q} is neither a transaction hash (0x and 64 hex digits) nor an address "
            f"(0x and 40 hex digits): it has {len(q) - 2} characters after 0x")
    else:
        if WITHDRAWAL_ID.match(q) and (found := _withdrawal(uow, int(q))) is not None:
            hits.append(found)
        if not _USER_ID.fullmatch(q):
            malformed = SearchInvalid(
                f"{q!r} is not a user id, a reference, an address, a transaction hash or a "
                "withdrawal id (ids are letters, digits and _ . -)")
    hits.extend(_users(uow, q, ledger_too=malformed is None))
    if not hits and malformed is not None:
        raise malformed
    return hits


def for_scope(hits: list[Hit], reads_users: bool) -> list[Hit]:
    """The hits a person may open: all for support and admin, the withdrawals for an approver
    (as the API lets it read nothing else; nothing else is even named)."""
    return hits if reads_users else [h for h in hits if h.href.startswith(
        "/console/withdrawals/")]


def _transaction(uow: UnitOfWork, chains: ChainsConfig, tx_hash: str) -> list[Hit]:
    hits = []
    for chain in sorted(chains.chains):
        try:
            entries = deposits.timeline(uow, chain, tx_hash)
        except DepositNotFound:
            continue
        hits.append(Hit(f"/console/deposits/{chain}/{tx_hash}", f"Deposit transaction on {chain}",
                        f"{len(entries)} transfer{'s' if len(entries) != 1 else ''} to our "
                        "addresses"))
    withdrawal_id = withdrawals.withdrawal_of_tx_hash(uow, tx_hash)
    if withdrawal_id is not None:
        hits.append(Hit(f"/console/withdrawals/{withdrawal_id}", f"Withdrawal {withdrawal_id}",
                        "an attempt of this withdrawal has this hash"))
    return hits


def _address(uow: UnitOfWork, chains: ChainsConfig, address: str) -> list[Hit]:
    return [Hit(f"/console/users/{user_id}", f"User {user_id}", f"deposit address ({family})")
            for family in sorted({c.family for c in chains.chains.values()})
            if (user_id := deposits.user_of_address(uow, family, address)) is not None]


def _withdrawal(uow: UnitOfWork, withdrawal_id: int) -> Hit | None:
    w = withdrawals.find_withdrawal(uow, withdrawal_id) if withdrawal_id else None
    if w is None:
        return None
    return Hit(f"/console/withdrawals/{w.id}", f"Withdrawal {w.id}",
               f"{w.state} · user {w.user_id}")


def _users(uow: UnitOfWork, text: str, *, ledger_too: bool) -> list[Hit]:
    found = repo.users_by_id_or_reference(uow.conn, text, LIMIT)
    hits = [Hit(f"/console/users/{u.id}", f"User {u.id}",
                "user id" if u.id == text else
                f"reference {u.reference} of client {repo.client_name(uow.conn, u.client_id)}")
            for u in found]
    if ledger_too and not any(u.id == text for u in found) and ledger.user_balances(uow, text):
        # A user the ledger knows that was not created through the API.
        hits.insert(0, Hit(f"/console/users/{text}", f"User {text}", "ledger accounts"))
    return hits
