"""Request and response bodies of the API key routes (``api.routes.api_keys``)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from api.repository.clients import KeyRecord
from api.schemas import Body, Page


class ApiKeyItem(BaseModel):
    """An API key as listed: never its secret."""

    id: int = Field(description="The key's id (``POST /v1/admin/api-keys/{id}/revoke``).",
                    examples=[7])
    prefix: str = Field(description="The public part of the key (``cust_<prefix>_...``).",
                        examples=["3f9a0c1b2d4e"])
    scope: str = Field(description="client | support | admin | approver", examples=["client"])
    client: str = Field(description="The client (principal) the key belongs to.",
                        examples=["acme"])
    created_at: datetime = Field(description="When the key was created.")
    last_used_at: datetime | None = Field(
        description="Last successful authentication, to the minute (updated at most once a "
                    "minute).")
    expires_at: datetime | None = Field(description="Refused from then on; null: never.")
    revoked_at: datetime | None = Field(description="When it was revoked; null: it was not.")
    revoked_by: str | None = Field(
        description="Who revoked it: an admin's actor name, or cli:<os user>.")
    state: Literal["active", "expired", "revoked"] = Field(
        description="At the engine's clock: revoked, else expired past expires_at, else "
                    "active.")


class ApiKeyItems(Page):
    """API keys, by id (the list shape of every list: ``next_cursor`` pages on)."""

    items: list[ApiKeyItem] = Field(description="The keys of this page, by id.")


class ApiKeyCreate(Body):
    """A new key for ``client`` (created if new) with one ``scope``; optionally a lifetime from
    now on the engine's clock (a lifetime, not an instant: every value the schema admits is
    accepted, none can be in the past)."""

    client: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.@-]*$",
                        description="The client (principal) the key is for; created if new.",
                        examples=["acme"])
    scope: Literal["client", "support", "admin", "approver"] = Field(
        description="What the key may do.", examples=["client"])
    expires_in: str | None = Field(default=None, pattern=r"^[1-9][0-9]{0,5}[mhdw]$",
                                   description="A lifetime: 90m, 12h, 30d, 2w; none: the key "
                                               "lives until revoked.")


class ApiKeyCreated(ApiKeyItem):
    """The new key. ``key`` is the whole key, in this first answer only: only its SHA-256 is
    stored, so a replay of the request (same ``Idempotency-Key``) answers ``key`` null."""

    key: str | None = Field(description="The whole key, in the first answer only (null in a "
                                        "replay); store it now.")


def key_item(k: KeyRecord, now: datetime) -> ApiKeyItem:
    """The listed form of ``k`` at ``now`` (the engine's clock)."""
    state: Literal["active", "expired", "revoked"] = (
        "revoked" if k.revoked_at is not None
        else "expired" if k.expires_at is not None and k.expires_at <= now else "active")
    return ApiKeyItem(id=k.id, prefix=k.prefix, scope=k.scope, client=k.client_name,
                      created_at=k.created_at, last_used_at=k.last_used_at,
                      expires_at=k.expires_at, revoked_at=k.revoked_at,
                      revoked_by=k.revoked_by, state=state)
