"""Destination allowlists: add an address (usable after the activation delay), remove it (at
once, final), list them, shorten one address's delay by two different admins' votes, and
announce the addresses that became usable (``announce_activations``, a job).

Whether a withdrawal may go to a destination is decided by the reserve itself, in its
transaction (``requests._check_limits``); this module only keeps the lists. Times are the
engine's clock (``now``), passed in: tests move it by hand.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy.engine import Engine

from config.uow import UnitOfWork, run_in_transaction
from withdrawals import model
from withdrawals.errors import (
    AllowlistEntryExists,
    AllowlistEntryInvalid,
    AllowlistEntryNotFound,
    AllowlistEntryRemoved,
    ShorteningRefused,
    WithdrawalKeyConflict,
)
from withdrawals.repository import AllowlistEntry, VoteRecord
from withdrawals.repository import allowlist as allow_repo
from withdrawals.service.common import ADMIN, Actor


@dataclass(frozen=True)
class NewAddress:
    """An address to allowlist for ``client_id`` (all its users, or ``user_id`` only)."""

    client_id: int
    user_id: str | None
    chain: str
    address: str
    label: str
    request_key: str
    added_by: str


@dataclass(frozen=True)
class Added:
    """The entry an add resolved to; ``replayed`` when its key was used before."""

    entry: AllowlistEntry
    replayed: bool


def add_address(engine: Engine, new: NewAddress, *, delay_s: int, now: datetime) -> Added:
    """Allowlist ``new.address`` (EIP-55 checked, stored lower-case), usable from ``now +
    delay_s``; its webhook event ``allowlist.address_added`` is written in the same transaction.
    The same (client, key) again returns the first entry (another address or label under it:
    WithdrawalKeyConflict). Refused: a user that is not the client's (AllowlistEntryInvalid),
    an address listed already for that client, user and chain (AllowlistEntryExists)."""
    address = model.normalize_address(new.address)
    if not new.label.strip():
        raise AllowlistEntryInvalid("an allowlisted address needs a label")

    def work(uow: UnitOfWork) -> Added:
        if new.user_id is not None and allow_repo.user_client(uow.conn,
                                                              new.user_id) != new.client_id:
            raise AllowlistEntryInvalid(f"no user {new.user_id} of this client")
        entry_id = allow_repo.insert_entry(
            uow.conn, client_id=new.client_id, user_id=new.user_id, chain=new.chain,
            address=address, label=new.label, request_key=new.request_key,
            added_by=new.added_by, added_at=now, delay_s=delay_s)
        if entry_id is not None:
            found = allow_repo.get_entry(uow.conn, entry_id)
            assert found is not None
            return Added(found, False)
        first = allow_repo.entry_by_key(uow.conn, new.client_id, new.request_key)
        if first is None:
            raise AllowlistEntryExists(f"{address} is already allowlisted on {new.chain} for "
                                       + (f"user {new.user_id}" if new.user_id else "all users"))
        if (first.user_id, first.chain, first.address, first.label) != (
                new.user_id, new.chain, address, new.label):
            raise WithdrawalKeyConflict(
                f"key {new.request_key} was used to allowlist another address")
        return Added(first, True)

    return run_in_transaction(engine, work)


def get_entry(engine: Engine, entry_id: int, *, client_id: int | None = None) -> AllowlistEntry:
    """The entry ``entry_id`` (of ``client_id`` only, when given: another client's is
    AllowlistEntryNotFound, as a missing one)."""
    with UnitOfWork(engine) as uow:
        found = allow_repo.get_entry(uow.conn, entry_id)
    if found is None or (client_id is not None and found.client_id != client_id):
        raise AllowlistEntryNotFound(f"no allowlist entry {entry_id}")
    return found


def list_entries(uow: UnitOfWork, *, client_id: int | None, user_id: str | None = None,
                 chain: str | None = None, removed: bool = False, after_id: int = 0,
                 limit: int = 100) -> list[AllowlistEntry]:
    """Entries by id (see ``repository.allowlist.list_entries``)."""
    return allow_repo.list_entries(uow.conn, client_id=client_id, user_id=user_id, chain=chain,
                                   removed=removed, after_id=after_id, limit=limit)


def remove_address(engine: Engine, entry_id: int, *, by: str, now: datetime,
                   client_id: int | None = None) -> tuple[AllowlistEntry, bool]:
    """Remove the entry at once (final; ``allowlist.address_removed`` in the same transaction):
    the entry after it and whether this call removed it (False: removed before, kept). A
    reserve that read the entry holds it FOR SHARE: the removal waits for its commit, and every
    reserve after it refuses the address."""

    def work(uow: UnitOfWork) -> tuple[AllowlistEntry, bool]:
        found = allow_repo.get_entry(uow.conn, entry_id, lock=True)
        if found is None or (client_id is not None and found.client_id != client_id):
            raise AllowlistEntryNotFound(f"no allowlist entry {entry_id}")
        removed = allow_repo.remove_entry(uow.conn, entry_id, by, now)
        after = allow_repo.get_entry(uow.conn, entry_id)
        assert after is not None
        return after, removed

    return run_in_transaction(engine, work)


@dataclass(frozen=True)
class Shortening:
    """An entry after a vote to shorten its delay, with every vote on it; ``applied`` when this
    vote was the second admin's for that instant (the entry is active from it)."""

    entry: AllowlistEntry
    votes: tuple[VoteRecord, ...]
    applied: bool


def vote_shorten(engine: Engine, entry_id: int, actor: Actor, *, active_at: datetime,
                 reason: str, now: datetime) -> Shortening:
    """An admin's vote to make the entry active at ``active_at`` (earlier than now set, not
    before it was added); the second different admin's vote for the same instant applies it
    (the guard trigger checks the two votes again). Refused (ShorteningRefused): not an admin,
    no reason, the same admin twice, a removed entry (AllowlistEntryRemoved), an entry already
    active, an instant not earlier than its activation or before it was added."""
    if ADMIN not in actor.roles:
        raise ShorteningRefused(f"{actor.id} does not have the admin role")
    if not reason.strip():
        raise ShorteningRefused("a shortening needs a reason")

    def work(uow: UnitOfWork) -> Shortening:
        # Lock: two admins voting at once must both be counted (no lost second vote).
        found = allow_repo.get_entry(uow.conn, entry_id, lock=True)
        if found is None:
            raise AllowlistEntryNotFound(f"no allowlist entry {entry_id}")
        if found.removed_at is not None:
            raise AllowlistEntryRemoved(f"allowlist entry {entry_id} was removed")
        if found.active_at <= now:
            raise ShorteningRefused(f"allowlist entry {entry_id} is active already")
        if not found.added_at <= active_at < found.active_at:
            raise ShorteningRefused(
                f"the new activation must be at or after {found.added_at.isoformat()} (when it "
                f"was added) and before {found.active_at.isoformat()}")
        if not allow_repo.insert_vote(uow.conn, entry_id, actor.id, active_at, reason, now):
            raise ShorteningRefused(f"{actor.id} already voted for {active_at.isoformat()}")
        votes = allow_repo.list_votes(uow.conn, entry_id)
        admins = {v.admin for v in votes if v.active_at == active_at}
        applied = len(admins) >= 2
        if applied:
            allow_repo.set_active_at(uow.conn, entry_id, active_at)
        after = allow_repo.get_entry(uow.conn, entry_id)
        assert after is not None
        return Shortening(after, tuple(votes), applied)

    return run_in_transaction(engine, work)


#: How far back the activations job looks: an address that became active longer ago than
#: this while no job ran gets no ``allowlist.address_active`` event (``address_added``
#: already said when it would be).
ANNOUNCE_HORIZON_S = 7 * 86_400


def announce_activations(engine: Engine, *, now: datetime, limit: int = 1_000,
                         horizon_s: int = ANNOUNCE_HORIZON_S) -> int:
    """Tell each client which of its addresses became usable: one ``allowlist.address_active``
    event per live entry whose ``active_at`` passed (within ``horizon_s``), at most ``limit``
    per call; how many were written. Safe to run twice and concurrently (the event id is
    unique: a second writer's insert of the same event is skipped)."""
    with UnitOfWork(engine) as uow:
        written = allow_repo.announce_active(uow.conn, now, now - timedelta(seconds=horizon_s),
                                             limit)
        uow.commit()
    return written


def votes_of(engine: Engine, entry_id: int) -> tuple[VoteRecord, ...]:
    """The shortening votes on an entry, oldest first."""
    with UnitOfWork(engine) as uow:
        return tuple(allow_repo.list_votes(uow.conn, entry_id))
