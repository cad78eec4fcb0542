"""Response bodies of the proof-of-reserves routes (``api.routes.reserves``): the published
report (format ``custody-por-report/1``) and a user's inclusion proof (``custody-por-proof/1``),
both specified in ``docs/proof-of-reserves.md``. Amounts are decimal strings of the asset's
minor units (``scale`` digits); hashes are lower-case hex, never shortened."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

Minor = str
Hash = str


class ReportLedger(BaseModel):
    """The ledger point: every posting up to ``through_posting_id``, which is every ledger
    transaction committed before ``known_at``."""

    through_posting_id: str
    known_at: datetime


class ReportChain(BaseModel):
    """One chain at the block the report read it."""

    chain: str
    chain_id: int
    finality: str
    block_number: int
    block_hash: str


class ReportLiabilities(BaseModel):
    """The liabilities tree: its root (publish it), shape and per-asset sums."""

    root: Hash = Field(description="SHA-256 root of the Merkle-sum tree, 64 hex digits.")
    depth: int
    users: int = Field(description="Leaves: one per user with a ledger balance.")
    assets: list[str] = Field(description="The tree's asset order (sorted by ASCII bytes).")
    sums: list[Minor] = Field(description="The root's sums, one per asset in that order.")


class ReportAsset(BaseModel):
    """One asset's figures (decimal strings of minor units; ``difference`` and ``surplus``
    may be negative)."""

    asset: str
    scale: int
    liabilities_users: Minor = Field(description="The tree's sum: every user's posted balance.")
    liabilities_other: Minor = Field(description="Owed to no user yet: unattributed suspense, "
                                                 "provider clearing.")
    liabilities: Minor
    custody: Minor
    treasury: Minor
    ledger: Minor = Field(description="custody + treasury.")
    on_chain: Minor = Field(description="What all our addresses hold at the report's blocks.")
    difference: Minor = Field(description="on_chain - ledger: zero when nothing is in flight.")
    surplus: Minor = Field(description="on_chain - liabilities.")
    ratio: str | None = Field(description="on_chain / liabilities, rounded down to 6 digits; "
                                          "null when nothing is owed.")
    explained: bool = Field(description="False: a difference no movement in flight explains.")


class AddressHoldingItem(BaseModel):
    """What one address held of one asset, in the token's own units (``decimals``)."""

    asset: str
    token: str | None
    decimals: int
    balance: str


class ReportAddress(BaseModel):
    """One of our addresses with its holdings and the signature over its ownership message
    (EIP-191 personal_sign); ``signature`` is null for an external signer not imported yet."""

    chain: str
    address: str
    kind: Literal["hot", "cold", "deposit"]
    holdings: list[AddressHoldingItem]
    message: str
    signer: Literal["engine", "external"]
    signature: str | None


class ReserveReport(BaseModel):
    """A proof-of-reserves report as published."""

    format: Literal["custody-por-report/1"]
    id: int
    taken_at: datetime
    ledger: ReportLedger
    chains: list[ReportChain]
    liabilities: ReportLiabilities
    assets: list[ReportAsset]
    addresses: list[ReportAddress]


class ProofLeaf(BaseModel):
    """The leaf's inputs: the user, the salt (64 hex digits, secret to the user), the balances
    (one per asset in the tree's order), and its position."""

    user_id: str
    salt: str
    balances: list[Minor]
    index: int


class ProofNode(BaseModel):
    """A node: its hash and its sums per asset."""

    hash: Hash
    sums: list[Minor]


class InclusionProof(BaseModel):
    """A user's inclusion proof (``custody reserves verify PROOF.json ROOT`` or
    ``docs/verify_proof.py`` check it offline)."""

    format: Literal["custody-por-proof/1"]
    report_id: int
    taken_at: datetime
    scales: dict[str, int | None]
    assets: list[str]
    leaf: ProofLeaf
    path: list[ProofNode] = Field(description="Siblings from the leaf level up.")
    root: ProofNode
