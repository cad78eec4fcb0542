"""Our own addresses (DESIGN.md section 6a): transfers to hot and cold addresses, treasury
fundings, and the two-admin resolution of what nobody can attribute.

A transfer to a hot or cold address is a deposit of the same history (booking ``own``,
``address_kind`` hot or cold, no user). Nothing is booked before it is final; then, in the
watcher's settling transaction (``deposits.service.settle_final`` calls :func:`plan`):

- a movement we made, recorded by key in ``internal_transfers`` before it was sent (the
  sweeper writes it with every attempt of a sweep, gas top-up or cold transfer), is
  ``internal``: custody-neutral, no posting, the match as evidence; so is a refill of the hot
  wallet from one of our cold addresses that matches an open refill request (same chain,
  asset, source, destination and exact amount, oldest first, each at most once);
- a funding an operator declared in advance (:func:`declare_funding`), matched by (chain, asset,
  from address, exact amount), oldest unmatched first, each at most once (the funding row is
  locked; ``treasury_funding_matches`` holds one row per funding), is ``capital``:
  ``DR treasury:{chain} / CR equity:owner``;
- anything else is booked ``DR custody:{chain} / CR suspense:unattributed`` (custody still
  equals the chain) and opens a case of kind ``unattributed_own_address``. An admin proposes an
  outcome with a reason (:func:`propose_resolution`) and another admin approves it
  (:func:`approve_resolution`): ``capital`` moves it out of suspense into the treasury in one
  ledger transaction; ``return`` links it to a withdrawal through the withdrawal service (the
  API layer composes that, since deposits may not import withdrawals) and then records the
  resolution (:func:`approve_resolution` with ``return_linked``, or :func:`resolve_by_return`
  when an operator links a return directly); ``refund`` sends it back to its sender as a
  withdrawal of the company: once the API layer has validated that withdrawal, one ledger
  transaction ``DR suspense:unattributed / CR user:company:refunds:wallet`` (key
  ``deposit-case:{id}:refund``) goes with the resolution, then the API layer requests the
  withdrawal of :data:`REFUND_USER` (key ``case:{id}:refund``) and records its id
  (:func:`record_refund_withdrawal`). The deposit itself stays in state ``suspense``: the
  case's resolution says where the money went.

Every function takes an open unit of work and never commits.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from config.chains import ChainConfig, ChainsConfig, parse_units
from config.errors import ConfigurationInvalid
from config.uow import UnitOfWork
from deposits import model
from deposits import repository as repo
from deposits.errors import (
    CaseResolutionInvalid,
    DepositNotFound,
    FundingInvalid,
    FundingKeyReused,
    SecondAdminRequired,
)
from deposits.model import DepositEvent, DepositState
from deposits.repository import DepositRecord, VoteRecord

# The records this module returns, re-exported for its callers (routes never import a
# repository).
from deposits.repository import FundingRecord as FundingRecord
from ledger import chart
from ledger import service as ledger
from ledger.model import Account, Entry, Line

alerts = logging.getLogger("custody.alerts")
E, S = DepositEvent, DepositState
CASE_KIND = "unattributed_own_address"
OUTCOMES = ("capital", "return", "refund")
#: The company user whose wallet a refund passes through: credited from suspense, then debited
#: by the refund's withdrawal like any user's (reserve, fee, settlement). The colon keeps it out
#: of every client's reach: ``api.auth.USER_ID_PATTERN`` refuses it, so no API user can have
#: this id and no client route can name it; the ledger and the withdrawals accept any id of 1
#: to 100 characters, and the account ``user:company:refunds:wallet`` counts as a customer
#: liability in ``verify`` (what is left there, e.g. the unused fee reserve, stays visible).
REFUND_USER = "company:refunds"
_ADDRESS = re.compile(r"^0x[0-9a-fA-F]{40}$")
_MINOR = re.compile(r"[0-9]{1,40}")
AccountOf = Callable[[chart.AccountSpec, str], Account]


# --------------------------------------------------------------------------- at finality


@dataclass(frozen=True)
class OwnPlan:
    """How one final, attested transfer to our own address settles."""

    event: DepositEvent
    evidence: dict[str, Any]
    entry: Entry | None
    funding_id: int | None = None


def plan(uow: UnitOfWork, chain: ChainConfig, d: DepositRecord, account: AccountOf,
         rule: str, evidence: Mapping[str, Any], now: datetime,
         taken: set[int]) -> OwnPlan:
    """Classify a final transfer to a hot or cold address (locks the funding it matches).

    ``taken``: fundings already matched by this settling transaction (not yet written).
    """
    assert d.asset_code is not None and d.amount_minor is not None
    internal = repo.internal_transfer(uow.conn, d.key)
    if internal is None and d.address_kind == "hot" and d.from_address in chain.cold_addresses:
        refill = repo.match_refill(uow.conn, d.key, d.token, d.from_address, d.to_address,
                                   d.value, now)
        if refill is not None:
            return OwnPlan(E.INTERNAL_MATCHED, {**evidence, "rule": rule,
                                                "address_kind": d.address_kind,
                                                "refill_request_id": refill}, None)
    funding = None
    if internal is None:
        funding = repo.lock_unmatched_funding(uow.conn, chain.name, d.asset_code,
                                              d.from_address, d.amount_minor, sorted(taken))
    event = model.own_event(internal=internal is not None, funded=funding is not None)
    base = {**evidence, "rule": rule, "address_kind": d.address_kind}
    if internal is not None:
        return OwnPlan(event, {**base, "internal_transfer": {
            "kind": internal.kind, "reference": internal.reference,
            "recorded_at": internal.recorded_at.isoformat()}}, None)
    meta = {"deposit_id": d.id, "rule": rule, "evidence": dict(evidence),
            "address_kind": d.address_kind}

    def entry(kind: str, debit: chart.AccountSpec, credit: chart.AccountSpec, reason: str,
              metadata: Mapping[str, Any]) -> Entry:
        assert d.asset_code is not None and d.amount_minor is not None
        return Entry(
            idempotency_key=model.deposit_key(chain.name, d.tx_hash, d.position), kind=kind,
            effective_at=now, source=f"watcher:{chain.name}",
            reference=f"{chain.name}:{d.tx_hash}:{d.position}", reason=reason,
            lines=(Line(account(debit, d.asset_code), d.amount_minor),
                   Line(account(credit, d.asset_code), -d.amount_minor)),
            metadata=metadata)

    if funding is not None:
        taken.add(funding)
        return OwnPlan(event, {**base, "funding_id": funding},
                       entry("treasury_funding", chart.treasury(chain.name),
                             chart.equity_owner(), "declared funding",
                             {**meta, "funding_id": funding}), funding)
    return OwnPlan(event, base, entry("deposit_unattributed", chart.custody(chain.name),
                                      chart.suspense_unattributed(), CASE_KIND, meta))


def after_post(uow: UnitOfWork, d: DepositRecord, p: OwnPlan, transaction_id: int) -> None:
    """Write what goes with a posted own-address transfer: the funding match, or the case."""
    if p.funding_id is not None:
        repo.insert_funding_match(uow.conn, p.funding_id, d.id, transaction_id)
        return
    observed = {"to_address": d.to_address, "address_kind": d.address_kind,
                "from_address": d.from_address, "asset": d.asset_code,
                "amount_minor": str(d.amount_minor), "token": d.token}
    case_id = repo.insert_case(
        uow.conn, d.id, CASE_KIND, transaction_id,
        expected={"one_of": ["internal_transfer", "declared_funding", "withdrawal_return"]},
        observed=observed)
    alerts.warning("unattributed transfer to our %s address %s on %s: %s %s from %s booked to "
                   "suspense, case %s opened", d.address_kind, d.to_address, d.chain,
                   d.amount_minor, d.asset_code, d.from_address, case_id)


def record_internal_transfer(uow: UnitOfWork, key: repo.Key, kind: str, reference: str) -> None:
    """Record, before sending it, a movement between our own addresses by the deposit key of
    the transfer it will produce (for the outgoing-transaction mechanism; idempotent)."""
    repo.insert_internal_transfer(uow.conn, key, kind, reference)


# --------------------------------------------------------------------------- fundings


@dataclass(frozen=True)
class FundingRequest:
    """A funding as an operator declares it: ``amount`` is the text they gave, an integer string
    of the asset's minor units (``"2500000000000000000"`` for 2.5 ETH), as every amount the API
    takes."""

    chain: str
    asset: str
    amount: str
    from_address: str
    reason: str


def _checked(config: ChainsConfig, req: FundingRequest) -> dict[str, Any]:
    chain = config.chains.get(req.chain)
    if chain is None:
        raise FundingInvalid(f"no chain {req.chain!r} in the configuration")
    listed = {chain.native_asset, *(t.asset for t in chain.tokens)}
    if req.asset not in listed:
        raise FundingInvalid(f"asset {req.asset!r} is not the native asset or a listed token "
                             f"of {req.chain} ({', '.join(sorted(listed))})")
    # Digits only: a decimal point, an exponent or a sign is refused rather than read in some
    # other unit (a funding declared 1000 times too small would never match its transfer).
    if not _MINOR.fullmatch(req.amount):
        raise FundingInvalid(f"amount must be an integer string of {req.asset} minor units "
                             f"(scale {config.assets[req.asset].scale}), got {req.amount[:50]!r}")
    try:
        amount = parse_units(req.amount, 0, what="amount")
    except ConfigurationInvalid as exc:
        raise FundingInvalid(exc.message) from None
    if amount <= 0:
        raise FundingInvalid(f"amount must be positive, got {req.amount!r}")
    if not _ADDRESS.match(req.from_address):
        raise FundingInvalid(f"from address {req.from_address!r} is not a 0x address of 40 hex "
                             "digits")
    if not req.reason.strip() or len(req.reason) > 1000:
        raise FundingInvalid("a funding needs a reason (1 to 1000 characters)")
    return {"chain": req.chain, "asset_code": req.asset, "amount_minor": amount,
            "from_address": req.from_address.lower(), "reason": req.reason}


def validate_funding(config: ChainsConfig, req: FundingRequest) -> int:
    """The amount in minor units, or FundingInvalid naming the bad field (nothing written)."""
    return int(_checked(config, req)["amount_minor"])


def declare_funding(uow: UnitOfWork, config: ChainsConfig, req: FundingRequest, *,
                    declared_by: str, idempotency_key: str) -> tuple[FundingRecord, bool]:
    """Declare expected company capital; returns (funding, replayed).

    The same key with the same fields returns the first declaration (``replayed``); with other
    fields it is FundingKeyReused. Bad input is FundingInvalid and writes nothing.
    """
    if not 1 <= len(idempotency_key) <= 300:
        raise FundingInvalid("the idempotency key must have 1 to 300 characters")
    if not 1 <= len(declared_by) <= 200:
        raise FundingInvalid("declared_by must have 1 to 200 characters")
    fields = _checked(config, req)
    fp = hashlib.sha256(json.dumps(fields, sort_keys=True, default=str).encode()).hexdigest()
    record = {**fields, "declared_by": declared_by, "idempotency_key": idempotency_key,
              "fingerprint": fp}
    inserted = repo.insert_funding(uow.conn, record)
    found = repo.funding_by_key(uow.conn, idempotency_key)
    assert found is not None
    if inserted is None and found.fingerprint != fp:
        raise FundingKeyReused(f"key {idempotency_key!r} declared another funding "
                               f"(funding {found.id})")
    return found, inserted is None


def list_fundings(uow: UnitOfWork, *, chain: str | None = None, limit: int = 200,
                  before_id: int | None = None, since: datetime | None = None,
                  until: datetime | None = None) -> list[FundingRecord]:
    """Declared fundings (matched or not), newest first (ids below ``before_id``, declared in
    ``[since, until)``, when given)."""
    return repo.fundings(uow.conn, chain=chain, limit=limit, before_id=before_id, since=since,
                         until=until)


# --------------------------------------------------------------------------- cases


@dataclass(frozen=True)
class CaseOutcome:
    """A two-admin decision on a case, as far as it went."""

    case_id: int
    state: str  # "proposed" or "resolved"
    outcome: str
    proposed_by: str
    reason: str
    approved_by: str | None = None
    withdrawal_id: int | None = None
    ledger_transaction_id: int | None = None


def _outcome(case: repo.CaseRecord, votes: Mapping[str, VoteRecord]) -> CaseOutcome:
    p, a = votes["proposal"], votes.get("approval")
    return CaseOutcome(case.id, "resolved" if case.resolved_by else "proposed", p.outcome,
                       p.voted_by, p.reason, a.voted_by if a else case.approved_by,
                       p.withdrawal_id or case.withdrawal_id, case.resolution_transaction_id)


def _case(uow: UnitOfWork, case_id: int) -> repo.CaseRecord:
    found = repo.get_cases(uow.conn, case_id=case_id)
    if not found:
        raise DepositNotFound(f"no case {case_id}")
    if found[0].kind != CASE_KIND:
        raise CaseResolutionInvalid(f"case {case_id} is a {found[0].kind} case: resolve it "
                                    "with the deposit case resolution (reverse or not)")
    return found[0]


def list_cases(uow: UnitOfWork, *, resolved: bool = False) -> list[repo.CaseRecord]:
    """Cases of every kind, oldest first: the open ones, or all with ``resolved`` (each with
    its resolution: outcome, approver, ledger transaction, withdrawal)."""
    found = repo.get_cases(uow.conn)
    return found if resolved else [c for c in found if c.resolved_by is None]


def propose_resolution(uow: UnitOfWork, case_id: int, *, outcome: str, by: str, reason: str,
                       withdrawal_id: int | None = None) -> CaseOutcome:
    """An admin proposes how to resolve an unattributed own-address case (idempotent: the
    same proposal again returns it; another one while it stands is refused)."""
    if outcome not in OUTCOMES:
        raise CaseResolutionInvalid(f"outcome must be capital, return or refund, got "
                                    f"{outcome!r}")
    if (outcome == "return") != (withdrawal_id is not None):
        raise CaseResolutionInvalid("a return names its withdrawal (and only a return does)")
    if not reason.strip() or not by.strip():
        raise CaseResolutionInvalid("a proposal needs the admin's name and a reason")
    repo.lock_case_votes(uow.conn, case_id)
    case = _case(uow, case_id)
    votes = repo.case_votes(uow.conn, case_id)
    p = votes.get("proposal")
    if p is not None:
        if (p.voted_by, p.outcome, p.withdrawal_id) == (by, outcome, withdrawal_id):
            return _outcome(case, votes)
        raise CaseResolutionInvalid(f"case {case_id} already has a proposal ({p.outcome} by "
                                    f"{p.voted_by}); another admin approves or it stands")
    if case.resolved_by is not None:
        raise CaseResolutionInvalid(f"case {case_id} is already resolved")
    repo.insert_case_vote(uow.conn, case_id, "proposal", outcome, withdrawal_id, reason, by)
    return _outcome(case, repo.case_votes(uow.conn, case_id))


def judge_approval(uow: UnitOfWork, case_id: int, *,
                   by: str) -> tuple[CaseOutcome, repo.DepositRecord, bool]:
    """Check that ``by`` may approve the case's proposal: (proposal, deposit, replayed).

    ``replayed``: ``by`` approved it already (the resolution is returned, nothing changes), or
    the case is resolved as a ``refund`` and ``by`` is not its proposer: the caller then
    completes the refund's withdrawal request (a replay by its key after a crash between the
    resolution and the request). Raises SecondAdminRequired for the proposer,
    CaseResolutionInvalid otherwise.
    """
    repo.lock_case_votes(uow.conn, case_id)
    case = _case(uow, case_id)
    votes = repo.case_votes(uow.conn, case_id)
    if "proposal" not in votes:
        raise CaseResolutionInvalid(f"case {case_id} has no proposal to approve")
    current = _outcome(case, votes)
    deposit = repo.deposit_by_id(uow.conn, case.deposit_id)
    approval = votes.get("approval")
    if approval is not None and approval.voted_by == by:
        return current, deposit, True
    if votes["proposal"].voted_by == by:
        raise SecondAdminRequired(f"case {case_id} was proposed by {by}: another admin must "
                                  "approve it")
    if case.resolved_by is not None:
        if current.outcome == "refund":
            return current, deposit, True
        raise CaseResolutionInvalid(f"case {case_id} is already resolved")
    return current, deposit, False


def approve_resolution(uow: UnitOfWork, case_id: int, *, by: str, now: datetime,
                       return_linked: bool = False,
                       refund_validated: bool = False) -> CaseOutcome:
    """A second admin approves the proposal, which is carried out in this transaction.

    ``capital``: one ledger transaction ``DR suspense / CR custody`` and ``DR treasury /
    CR equity:owner`` referencing the case, the deposit moves to ``capital``. ``return``: the
    caller has linked the return (``return_linked``), this records the approval. ``refund``:
    the caller has validated the refund's withdrawal (``refund_validated``); one ledger
    transaction ``DR suspense / CR user:company:refunds:wallet``; the caller requests the
    withdrawal after this commits.
    """
    proposal, d, replayed = judge_approval(uow, case_id, by=by)
    if replayed:
        return proposal
    if proposal.outcome == "return" and not return_linked:
        raise CaseResolutionInvalid(f"case {case_id}: a return is approved through the "
                                    "withdrawal's return link (API or CLI), not here")
    if proposal.outcome == "refund" and not refund_validated:
        raise CaseResolutionInvalid(f"case {case_id}: a refund is approved through the API "
                                    "or the CLI, which check its withdrawal first")
    transaction_id = None
    if proposal.outcome == "capital":
        transaction_id = _post_capital(uow, case_id, d, by, proposal.reason, now)
    elif proposal.outcome == "refund":
        transaction_id = _post_refund(uow, case_id, d, by, proposal.reason, now)
    repo.insert_case_vote(uow.conn, case_id, "approval", proposal.outcome,
                          proposal.withdrawal_id, proposal.reason, by)
    repo.insert_case_resolution(uow.conn, case_id, None, proposal.proposed_by, proposal.reason,
                                outcome=proposal.outcome, approved_by=by,
                                ledger_transaction_id=transaction_id,
                                withdrawal_id=proposal.withdrawal_id)
    return _outcome(_case(uow, case_id), repo.case_votes(uow.conn, case_id))


def _post_capital(uow: UnitOfWork, case_id: int, d: DepositRecord, by: str, reason: str,
                  now: datetime) -> int:
    if d.state != S.SUSPENSE or d.asset_code is None or d.amount_minor is None:
        raise CaseResolutionInvalid(f"case {case_id}: deposit {d.id} is {d.state}, not in "
                                    "suspense")
    asset = ledger.get_asset(uow, d.asset_code)
    amount = d.amount_minor

    def acct(spec: chart.AccountSpec) -> Account:
        return ledger.open_account(uow, spec, asset)

    posted = ledger.post(uow, Entry(
        idempotency_key=f"deposit-case:{case_id}:capital", kind="treasury_capital_decided",
        effective_at=now, source=by, reference=f"case:{case_id}",
        reason=f"case {case_id}: {reason}",
        lines=(Line(acct(chart.suspense_unattributed()), amount),
               Line(acct(chart.custody(d.chain)), -amount),
               Line(acct(chart.treasury(d.chain)), amount),
               Line(acct(chart.equity_owner()), -amount)),
        metadata={"case_id": case_id, "deposit_id": d.id}))
    from deposits.service import append_event

    append_event(uow, d, E.CAPITAL_DECIDED, now=now, reason=reason,
                 evidence={"case_id": case_id, "ledger_transaction_id": posted.transaction_id,
                           "approved_by": by})
    return posted.transaction_id


def _post_refund(uow: UnitOfWork, case_id: int, d: DepositRecord, by: str, reason: str,
                 now: datetime) -> int:
    """``DR suspense:unattributed / CR user:company:refunds:wallet``, the whole amount: custody
    is untouched (the money is still on chain) and the company user's withdrawal then pays it
    out like any user's."""
    if d.state != S.SUSPENSE or d.asset_code is None or d.amount_minor is None:
        raise CaseResolutionInvalid(f"case {case_id}: deposit {d.id} is {d.state}, not in "
                                    "suspense")
    asset = ledger.get_asset(uow, d.asset_code)
    wallet, _ = ledger.open_user_accounts(uow, REFUND_USER, asset)
    posted = ledger.post(uow, Entry(
        idempotency_key=f"deposit-case:{case_id}:refund", kind="deposit_refund_decided",
        effective_at=now, source=by, reference=f"case:{case_id}",
        reason=f"case {case_id}: {reason}",
        lines=(Line(ledger.open_account(uow, chart.suspense_unattributed(), asset),
                    d.amount_minor),
               Line(wallet, -d.amount_minor)),
        metadata={"case_id": case_id, "deposit_id": d.id, "refund_to": d.from_address}))
    return posted.transaction_id


def record_refund_withdrawal(uow: UnitOfWork, case_id: int, withdrawal_id: int) -> None:
    """Record the withdrawal that pays a refund-resolved case back to its sender
    (idempotent)."""
    repo.insert_case_refund(uow.conn, case_id, withdrawal_id)


def resolve_by_return(uow: UnitOfWork, key: repo.Key, *, withdrawal_id: int, by: str,
                      reason: str) -> int | None:
    """After an operator linked this transfer as a withdrawal's return: resolve its open
    unattributed own-address case, if any (returns the case id, or None)."""
    found = repo.lock_deposits(uow.conn, [key]).get(key)
    if found is None:
        return None
    for case in repo.get_cases(uow.conn, deposit_id=found.id):
        if case.kind == CASE_KIND and case.resolved_by is None:
            repo.lock_case_votes(uow.conn, case.id)
            repo.insert_case_resolution(uow.conn, case.id, None, by, reason, outcome="return",
                                        withdrawal_id=withdrawal_id)
            return case.id
    return None
