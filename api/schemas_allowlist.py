"""Request and response bodies of the allowlist routes (``api.routes.allowlist``)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from api.auth import USER_ID_PATTERN
from api.schemas import ADDRESS_PATTERN, CHAIN_PATTERN, INSTANT_PATTERN, INSTANT_RANGE, Body, Page
from withdrawals.service import AllowlistEntryRecord, Shortening

EXAMPLE_ADDRESS = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC"


class AllowlistEntryCreate(Body):
    """A destination to allowlist: for every user of the client, or for ``user_id`` only. It is
    usable after the configured activation delay (``active_at`` in the answer)."""

    chain: str = Field(pattern=CHAIN_PATTERN, description="Chain name as configured.",
                       examples=["devnet"])
    address: str = Field(pattern=ADDRESS_PATTERN, examples=[EXAMPLE_ADDRESS], description=(
        "The destination: 0x and 40 hex digits, all one case or with a valid EIP-55 "
        "checksum (mixed case that fails it is refused: 422 address_invalid)."))
    label: str = Field(min_length=1, max_length=200, pattern=r"\S",
                       description="Your name for the destination.", examples=["cold store"])
    user_id: str | None = Field(default=None, pattern=USER_ID_PATTERN, examples=["usr_42"],
                                description="Only for this user of the client; omit: for "
                                            "every user of the client.")


class AdminAllowlistEntryCreate(AllowlistEntryCreate):
    """A destination an admin allowlists for a client (``POST /v1/admin/allowlist``)."""

    client: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.@-]*$",
                        examples=["acme"], description="The client whose allowlist it is.")


class AllowlistEntry(BaseModel):
    """An allowlisted destination."""

    id: int = Field(description="The entry's id (``DELETE /v1/allowlist/{id}``).", examples=[7])
    client: str = Field(description="The API client whose allowlist it is.", examples=["acme"])
    user_id: str | None = Field(description="The one user it is for; null: every user of "
                                            "the client.", examples=["usr_42"])
    chain: str = Field(description="Chain name as configured.", examples=["devnet"])
    address: str = Field(description="The destination, lower-case hex.",
                         examples=[EXAMPLE_ADDRESS.lower()])
    label: str = Field(description="The client's name for the destination.",
                       examples=["cold store"])
    added_by: str = Field(description="Who added it (an actor name).", examples=["acme"])
    added_at: datetime = Field(description="When it was added (the engine's clock).")
    delay_s: int = Field(description="The activation delay configured when it was added.",
                         examples=[86_400])
    active_at: datetime = Field(description="From then on withdrawals to it are accepted "
                                            "(earlier than added_at + delay_s only when two "
                                            "admins shortened it).")
    removed_at: datetime | None = Field(description="When it was removed (final); null: "
                                                    "listed.")
    removed_by: str | None = Field(description="Who removed it; null: listed.",
                                   examples=["acme"])
    state: Literal["pending", "active", "removed"] = Field(
        description="At the engine's clock: removed, else active from active_at, else "
                    "pending (withdrawals to it are refused with destination_not_allowed).")


class AllowlistEntries(Page):
    """Allowlist entries by id (the list shape of every list: ``next_cursor`` pages on)."""

    items: list[AllowlistEntry] = Field(description="The entries of this page, by id.")


class ShortenVote(Body):
    """An admin's vote to make one address usable earlier, at ``active_at``: applied when a
    second, different admin votes for the same instant."""

    active_at: str = Field(max_length=64, json_schema_extra={"format": "date-time",
                                                              "pattern": INSTANT_PATTERN},
                           description="The new activation instant (ISO 8601; naive: UTC): "
                                       "at or after when it was added, before its current "
                                       "activation. " + INSTANT_RANGE,
                           examples=["2026-12-03T15:00:00Z"])
    reason: str = Field(min_length=1, max_length=1000, pattern=r"\S",
                        description="Why it may be used earlier (audited).",
                        examples=["confirmed by phone with the customer"])


class ShortenVoteItem(BaseModel):
    """One admin's vote."""

    admin: str = Field(description="The admin who voted.", examples=["carol"])
    active_at: datetime = Field(description="The activation instant voted for.")
    reason: str = Field(description="Why.", examples=["confirmed by phone"])
    voted_at: datetime = Field(description="When (the engine's clock).")


class AllowlistShortening(BaseModel):
    """The entry after a vote, with every vote on it."""

    entry: AllowlistEntry = Field(description="The entry after the vote.")
    votes: list[ShortenVoteItem] = Field(description="Every vote on it, oldest first.")
    applied: bool = Field(description="Whether this vote was the second admin's for that "
                                      "instant: the entry is active from it.")


def entry_view(e: AllowlistEntryRecord, now: datetime) -> AllowlistEntry:
    """The API's form of ``e`` at ``now`` (the engine's clock)."""
    state: Literal["pending", "active", "removed"] = (
        "removed" if e.removed_at is not None else "active" if e.active_at <= now
        else "pending")
    return AllowlistEntry(id=e.id, client=e.client, user_id=e.user_id, chain=e.chain,
                          address=e.address, label=e.label, added_by=e.added_by,
                          added_at=e.added_at, delay_s=e.delay_s, active_at=e.active_at,
                          removed_at=e.removed_at, removed_by=e.removed_by, state=state)


def shortening_view(s: Shortening, now: datetime) -> AllowlistShortening:
    """The API's form of a shortening vote's outcome."""
    return AllowlistShortening(
        entry=entry_view(s.entry, now), applied=s.applied,
        votes=[ShortenVoteItem(admin=v.admin, active_at=v.active_at, reason=v.reason,
                               voted_at=v.voted_at) for v in s.votes])
