"""What the use cases share: the roles the API layer authenticates (``APPROVER``, ``ADMIN``) and
who acts (``Actor``), the ledger source of withdrawals' entries, the ``withdrawals`` logger,
and the read of a withdrawal under its row lock (``_locked``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from config.uow import UnitOfWork
from withdrawals import repository as repo
from withdrawals.errors import WithdrawalNotFound
from withdrawals.repository import WithdrawalRecord

log = logging.getLogger("withdrawals")
SOURCE = "withdrawals"
APPROVER = "approver"
ADMIN = "admin"


@dataclass(frozen=True)
class Actor:
    """Who acts, with the roles the API layer authenticated (``approver``, ``admin``)."""

    id: str
    roles: frozenset[str] = field(default_factory=frozenset)


def _locked(uow: UnitOfWork, withdrawal_id: int) -> WithdrawalRecord:
    w = repo.get_withdrawal(uow.conn, withdrawal_id, for_update=True)
    if w is None:
        raise WithdrawalNotFound(f"no withdrawal {withdrawal_id}")
    return w
