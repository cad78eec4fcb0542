"""Use cases of the deposit side. Each function takes an open unit of work and never commits.

The watcher (``deposits.watcher``) calls the node outside any transaction and then one of the
``record_*`` / ``settle_final`` functions here to write what it learned; every accepted event
goes through ``model.transition`` and is appended to ``deposit_events`` in the same database
transaction as the deposit's new current state (and, for a credit, the ledger posting).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from chains.model import (
    AmountThreshold,
    FinalityPolicy,
    FinalityRule,
    evaluate_deposit_finality,
    parse_finality_rule,
)
from config.chains import AddressSourceConfig, ChainConfig, ChainsConfig
from config.money import AmountTextInvalid, parse_decimal_amount
from config.uow import UnitOfWork
from deposits import model, own
from deposits import repository as repo
from deposits.attestors import Attestation, Verdict
from deposits.errors import (
    AddressSourceUnavailable,
    CaseResolutionInvalid,
    DepositNotFound,
    NotificationInvalid,
)
from deposits.model import Booking, DepositEvent, DepositState, Effect, Listing

# The records this service returns, re-exported for its callers (routes never import a
# repository).
from deposits.repository import CaseRecord as CaseRecord
from deposits.repository import DepositRecord as DepositRecord
from deposits.repository import Key
from ledger import chart
from ledger import service as ledger
from ledger.errors import AccountMismatch
from ledger.model import Account, AccountType, Entry, Line

if TYPE_CHECKING:
    from chains.addresses import AddressSource

alerts = logging.getLogger("custody.alerts")
E, S = DepositEvent, DepositState


# --------------------------------------------------------------------------- addresses


def address_source(cfg: AddressSourceConfig) -> AddressSource:
    """The address source a configuration names (the seed comes from the environment)."""
    # Imported here: eth_account costs most of a watcher process's start-up time.
    from chains.addresses import MnemonicAddressSource, XpubAddressSource

    if cfg.kind == "xpub":
        try:
            return XpubAddressSource(str(cfg.xpub))
        except ValueError as exc:
            raise AddressSourceUnavailable(f"unusable xpub: {exc}") from exc
    mnemonic = os.environ.get(str(cfg.mnemonic_env))
    if not mnemonic:
        raise AddressSourceUnavailable(f"variable {cfg.mnemonic_env} holds no mnemonic")
    return MnemonicAddressSource(mnemonic, account=cfg.account)


def assign_address(uow: UnitOfWork, family: str, user_id: str, source: AddressSource) -> str:
    """The user's deposit address in ``family``, derived at the next index if new."""
    existing = repo.address_of_user(uow.conn, family, user_id)
    if existing is not None:
        return existing
    repo.lock_address_family(uow.conn, family)
    existing = repo.address_of_user(uow.conn, family, user_id)  # Re-read under the lock.
    if existing is not None:
        return existing
    index = repo.next_address_index(uow.conn, family)
    address = source.address_for(index).lower()
    repo.insert_addresses(uow.conn, family, [(address, index, user_id)])
    return address


def address_of_user(uow: UnitOfWork, family: str, user_id: str) -> str | None:
    """The user's deposit address in ``family``, or None when none is assigned yet."""
    return repo.address_of_user(uow.conn, family, user_id)


def user_has_address(uow: UnitOfWork, user_id: str) -> bool:
    """Whether the user has a deposit address in any family."""
    return repo.user_has_address(uow.conn, user_id)


def is_deposit_address(uow: UnitOfWork, family: str, address: str) -> bool:
    """Whether ``address`` (any case) is one of our deposit addresses in ``family``."""
    return bool(repo.users_of_addresses(uow.conn, family, [address]))


def user_of_address(uow: UnitOfWork, family: str, address: str) -> str | None:
    """The user whose deposit address in ``family`` is ``address`` (any case), if any."""
    return repo.users_of_addresses(uow.conn, family, [address]).get(address.lower())


# --------------------------------------------------------------------------- balances, views


def pending_incoming(uow: UnitOfWork, user_id: str) -> dict[str, int]:
    """Pending incoming per ledger asset code: the user's deposits seen on chain, not yet
    posted and not failed (included, reorged out and waiting, or final awaiting its custody
    record). Pass it to ``ledger.service.user_balances(pending_incoming=...)``."""
    return repo.pending_incoming(uow.conn, user_id, sorted(model.PENDING_STATES))


def waiting_for_finality(uow: UnitOfWork, chain: str, *, limit: int) -> list[DepositRecord]:
    """Deposits of ``chain`` seen on chain and not final yet (included, or reorged out and
    waiting to land again), oldest first, at most ``limit``."""
    return repo.deposits_in_states(
        uow.conn, chain, [DepositState.INCLUDED, DepositState.UNCONFIRMED], limit=limit)


def held_for_review(uow: UnitOfWork, chain: str, *, limit: int) -> list[DepositRecord]:
    """Deposits of ``chain`` held for a person's review (nothing posted), oldest first, at most
    ``limit``."""
    return repo.deposits_in_states(uow.conn, chain, [DepositState.HELD_FOR_REVIEW], limit=limit)


@dataclass(frozen=True)
class TimelineEntry:
    """One deposit of a transaction: its facts, its history and its ledger transactions."""

    deposit: DepositRecord
    events: list[repo.EventRecord]
    ledger_transactions: list[Any]
    cases: list[repo.CaseRecord]


def timeline(uow: UnitOfWork, chain: str, tx_hash: str) -> list[TimelineEntry]:
    """Every transfer to us in a transaction, each with its full history, oldest first."""
    found = []
    for d in repo.deposits_of_transaction(uow.conn, chain, tx_hash):
        cases = repo.get_cases(uow.conn, deposit_id=d.id)
        txids = [d.ledger_transaction_id] if d.ledger_transaction_id else []
        txids += [c.reversal_transaction_id for c in cases if c.reversal_transaction_id]
        found.append(TimelineEntry(d, repo.events_of(uow.conn, d.id),
                                   [ledger.get_transaction(uow, t) for t in txids], cases))
    if not found:
        raise DepositNotFound(f"no deposit in transaction {tx_hash} on {chain}")
    return found


def user_deposits(uow: UnitOfWork, user_id: str, *, limit: int = 200,
                  before_id: int | None = None, since: datetime | None = None,
                  until: datetime | None = None) -> list[DepositRecord]:
    """A page of the user's deposits with their current state, newest first.

    Keyset pagination in SQL: pass the last (smallest) id of the previous page as
    ``before_id`` to get the next page; ``None`` starts from the newest deposit.
    """
    if limit < 1:
        raise ValueError(f"limit must be at least 1, got {limit}")
    return repo.deposits_of_user(uow.conn, user_id, limit=limit, before_id=before_id,
                                 since=since, until=until)


# --------------------------------------------------------------------------- history writes


class HistoryBatch:
    """Events and new current states collected for one ``append_events`` call."""

    def __init__(self, now: datetime) -> None:
        self.now = now
        self.events: list[dict[str, Any]] = []
        self.states: dict[int, dict[str, Any]] = {}

    def add(self, d: DepositRecord | dict[str, Any], state: DepositState | None,
            event: DepositEvent, **fields: Any) -> model.Transition:
        def get(name: str) -> Any:
            return d[name] if isinstance(d, dict) else getattr(d, name)

        deposit_id = get("id")
        current = self.states.get(deposit_id)
        before = DepositState(current["state"]) if current else state
        moved = model.transition(before, event, now=self.now)
        base = current or {"block_number": get("block_number"), "block_hash": get("block_hash"),
                           "confirmations": get("confirmations"), "ledger_transaction_id": None}
        after = {**base, **{k: v for k, v in fields.items() if k in base}}
        self.states[deposit_id] = {**after, "deposit_id": deposit_id, "state": moved.state.value}
        self.events.append({
            "deposit_id": deposit_id, "chain": get("chain"), "tx_hash": get("tx_hash"),
            "position": get("position"), "event": event.value, "state": moved.state.value,
            "block_number": after["block_number"], "block_hash": after["block_hash"],
            "confirmations": after["confirmations"], "observed_at": self.now.isoformat(),
            **{k: v for k, v in fields.items() if k not in base},
            "ledger_transaction_id": fields.get("ledger_transaction_id"),
        })
        return moved

    def write(self, uow: UnitOfWork) -> None:
        """Append the events and move each deposit's state with them (one statement)."""
        repo.append_events(uow.conn, self.events, list(self.states.values()))


def listing(config: ChainsConfig, chain: ChainConfig, token: str | None) -> Listing:
    """What the configuration says about ``token`` (None: the native coin) on ``chain``."""
    symbols = chain.listed_symbols
    if token is None:
        asset = config.assets[chain.native_asset]
        return Listing(asset.code, chain.native_decimals, asset.scale,
                       chain.native_minimum_minor, symbols)
    listed = chain.token(token)
    if listed is None:
        return Listing(None, None, None, 0, symbols)
    asset = config.assets[listed.asset]
    return Listing(asset.code, listed.decimals, asset.scale, listed.minimum_minor, symbols)


def finality_policy(chain: ChainConfig) -> FinalityPolicy:
    """The chain's finality rule with its amount thresholds (``finality_by_amount``)."""
    return FinalityPolicy(parse_finality_rule(chain.finality), tuple(
        AmountThreshold(t.asset, t.at_least_minor, t.at_least, parse_finality_rule(t.finality))
        for t in chain.finality_by_amount))


def policy_of(rule: FinalityRule | FinalityPolicy) -> FinalityPolicy:
    """``rule`` as a policy (a bare rule is a policy without thresholds)."""
    return rule if isinstance(rule, FinalityPolicy) else FinalityPolicy(rule)


#: A deposit to credit: its record, its settling event, the rule text and the evidence.
_Credit = tuple[DepositRecord, DepositEvent, str, dict[str, Any]]


def _post_credits(uow: UnitOfWork, batch: HistoryBatch, credited: Sequence[_Credit],
                  accounts: AccountCache | None, chain: ChainConfig, now: datetime,
                  entries: Sequence[Entry] | None = None,
                  plans: Mapping[int, own.OwnPlan] | None = None) -> dict[str, int]:
    """Post the credits (``entries``, else each deposit's own ``_entry``) in one
    ``ledger.post_batch`` and append each deposit's settling row with its ledger transaction.
    A refused posting raises: a deposit credit that the ledger refuses is a bug."""
    counts = {"credited": 0, "suspense": 0, "held": 0, "internal": 0, "capital": 0}
    if not credited:
        return counts
    if entries is None:
        assert accounts is not None
        entries = [_entry(chain, d, accounts, rule, evidence, now)
                   for d, _, rule, evidence in credited]
    for (d, event, rule, evidence), outcome in zip(
            credited, ledger.post_batch(uow, entries), strict=True):
        if outcome.error is not None:
            raise outcome.error  # A refused deposit posting is a bug: stop loudly.
        batch.add(d, S.FINAL, event, rule=rule, evidence=evidence,
                  ledger_transaction_id=outcome.transaction_id, reason=d.booking_reason)
        if plans and d.id in plans:
            assert outcome.transaction_id is not None
            own.after_post(uow, d, plans[d.id], outcome.transaction_id)
        counts[_COUNTED.get(event, "suspense")] += 1
    return counts


def record_progress(uow: UnitOfWork, chain: ChainConfig, rule: FinalityRule | FinalityPolicy,
                    keys: Sequence[Key], *, head_block: int, finalized_block: int | None,
                    canonical: Mapping[int, str], now: datetime) -> int:
    """Confirmation progress and finality of included deposits; returns how many became final.

    ``rule`` is the chain's rule, or its policy with amount thresholds: each deposit is judged
    under the rule its amount selects, and its rows name that rule (and the threshold).
    ``canonical`` holds the node's current hashes at the deposits' heights (read before this
    transaction); a deposit whose block hash differs is left alone: the next step's reorg
    check rewinds it.
    """
    batch, finals, policy = HistoryBatch(now), 0, policy_of(rule)
    for d in repo.lock_deposits(uow.conn, keys).values():
        if d.state != S.INCLUDED or d.block_number is None or d.block_hash is None:
            continue
        final, evidence = evaluate_deposit_finality(
            policy, asset=d.asset_code, amount_minor=d.amount_minor, tx_block=d.block_number,
            tx_block_hash=d.block_hash, head_block=head_block, finalized_block=finalized_block,
            canonical_hash=canonical.get(d.block_number))
        if final:
            batch.add(d, S.INCLUDED, E.FINALITY_REACHED, confirmations=evidence.confirmations,
                      rule=evidence.rule, evidence=evidence.to_json())
            finals += 1
        elif (evidence.confirmations != d.confirmations
              and canonical.get(d.block_number) == d.block_hash):
            batch.add(d, S.INCLUDED, E.CONFIRMATIONS_OBSERVED,
                      confirmations=evidence.confirmations, rule=evidence.rule,
                      evidence=evidence.to_json())
    batch.write(uow)
    return finals


def record_rewind(uow: UnitOfWork, chain: ChainConfig, ancestor_block: int,
                  observed: Mapping[str, Any], *, now: datetime) -> list[int]:
    """Roll the chain back to the common ancestor; returns the ids of cases opened.

    Deposits above it go back to unconfirmed; credited ones (a reorg deeper than the rule
    assumed) become disputed with a durable case and an alert. Nothing is reversed.
    """
    cursor = repo.get_cursor(uow.conn, chain.name, for_update=True)
    repo.save_cursor(uow.conn, chain.name, [(h, x) for h, x in cursor if h <= ancestor_block])
    states = [S.INCLUDED, S.FINAL, *sorted(model.SETTLED_STATES)]
    batch, cases = HistoryBatch(now), []
    for d in repo.deposits_above(uow.conn, chain.name, ancestor_block, states):
        cases += _reorged_out(uow, batch, d, {"ancestor_block": ancestor_block, **observed})
    batch.write(uow)
    return cases


def _reorged_out(uow: UnitOfWork, batch: HistoryBatch, d: DepositRecord,
                 observed: Mapping[str, Any]) -> list[int]:
    """Append ``block_reorged_out`` to a locked deposit; a settled one (money moved) opens
    the ``deep_reorg`` case and raises the alert. Returns the id of the case opened, if any."""
    moved = batch.add(d, DepositState(d.state), E.BLOCK_REORGED_OUT, evidence=dict(observed))
    cases = []
    if Effect.OPEN_CASE in moved.effects:
        cases.append(repo.insert_case(
            uow.conn, d.id, "deep_reorg", d.ledger_transaction_id,
            expected={"block_number": d.block_number, "block_hash": d.block_hash},
            observed=dict(observed)))
    if Effect.RAISE_ALERT in moved.effects:
        alerts.critical("deep reorg after crediting: deposit %s %s %s (ledger transaction "
                        "%s) left the canonical chain; case opened, nothing reversed",
                        d.chain, d.tx_hash, d.position, d.ledger_transaction_id)
    return cases


def record_deep_reorgs(uow: UnitOfWork, findings: Mapping[Key, Mapping[str, Any]], *,
                       now: datetime) -> list[int]:
    """Settled deposits a re-check found gone from the canonical chain (``findings``: what the
    node said, per deposit key, including the ``block_hash`` checked): each becomes disputed
    with a ``deep_reorg`` case and an alert, as in a rewind; nothing is reversed.

    Re-read under lock: a deposit already disputed (by the watcher's rewind or an earlier
    re-check), or whose block changed since it was read, is left alone, so running the
    re-check twice opens no second case. Returns the ids of the cases opened.
    """
    batch, cases = HistoryBatch(now), []
    for key, d in repo.lock_deposits(uow.conn, findings).items():
        observed = findings[key]
        if d.state not in model.SETTLED_STATES or d.block_hash != observed.get("block_hash"):
            continue
        cases += _reorged_out(uow, batch, d, {k: v for k, v in observed.items()
                                              if k != "block_hash"})
    batch.write(uow)
    return cases


def record_failures(uow: UnitOfWork, proofs: Mapping[Key, Mapping[str, Any]], *,
                    now: datetime) -> int:
    """Mark failed the unconfirmed deposits whose sender's nonce another final tx consumed."""
    batch = HistoryBatch(now)
    for key, d in repo.lock_deposits(uow.conn, proofs).items():
        if d.state == S.UNCONFIRMED:
            batch.add(d, S.UNCONFIRMED, E.NONCE_CONSUMED, evidence=dict(proofs[key]),
                      reason="nonce_consumed_by_final_transaction")
    batch.write(uow)
    return len(batch.events)


def record_early_completions(uow: UnitOfWork, chain: ChainConfig, *, now: datetime) -> int:
    """Hold deposits that the provider calls complete before our finality rule is met."""
    waiting = repo.deposits_in_states(uow.conn, chain.name, [S.INCLUDED, S.UNCONFIRMED],
                                      limit=10_000)
    inbox = repo.inbox_for(uow.conn, [d.key for d in waiting])
    early = {k: [n for n in notes if n.status == "complete"] for k, notes in inbox.items()}
    batch = HistoryBatch(now)
    for key, d in repo.lock_deposits(uow.conn, [k for k, n in early.items() if n]).items():
        if d.state in (S.INCLUDED, S.UNCONFIRMED):
            note = early[key][0]
            batch.add(d, DepositState(d.state), E.PROVIDER_COMPLETED_EARLY,
                      reason="provider_completed_early", inbox_event_id=note.event_id,
                      evidence={"confirmations": d.confirmations, "provider": note.provider})
    batch.write(uow)
    return len(batch.events)


# --------------------------------------------------------------------------- crediting


class AccountCache:
    """Ledger accounts the watcher posts to, opened once and remembered (they never change).

    Accounts are opened in their own committed unit of work (``ensure``), never inside the
    crediting transaction: a cached account must exist even if that transaction rolls back.
    The watcher's threads share one cache: ``ensure`` and ``forget`` take its lock.
    """

    def __init__(self) -> None:
        self._accounts: dict[tuple[str, str], Account] = {}
        self._lock = threading.Lock()

    def get(self, code: str, asset_code: str) -> Account:
        """A cached account (``ensure`` it first)."""
        return self._accounts[(code, asset_code)]

    def get_spec(self, spec: chart.AccountSpec, asset_code: str) -> Account:
        """A cached account by its spec (``ensure`` it first)."""
        return self._accounts[(spec.code, asset_code)]

    def ensure(self, uow: UnitOfWork, config: ChainsConfig,
               specs: Sequence[tuple[chart.AccountSpec, str]]) -> bool:
        """Open the missing accounts of (spec, asset code) pairs; True if any was missing."""
        with self._lock:
            return self._ensure(uow, config, specs)

    def _ensure(self, uow: UnitOfWork, config: ChainsConfig,
                specs: Sequence[tuple[chart.AccountSpec, str]]) -> bool:
        missing = [(s, a) for s, a in dict.fromkeys(specs) if (s.code, a) not in self._accounts]
        if not missing:
            return False
        assets = {a: ledger.open_asset(uow, a, config.assets[a].scale)
                  for a in sorted({a for _, a in missing})}
        # One statement for all of them: a catch-up meets hundreds of new users per step.
        opened = repo.open_accounts(uow.conn, [
            (s.code, assets[a].id, s.type.value, s.debits_must_not_exceed_credits,
             s.credits_must_not_exceed_debits) for s, a in missing])
        for spec, asset_code in missing:
            asset = assets[asset_code]
            row = opened[(spec.code, asset.id)]
            if (row.type, row.debits_must_not_exceed_credits,
                    row.credits_must_not_exceed_debits) != (
                    spec.type.value, spec.debits_must_not_exceed_credits,
                    spec.credits_must_not_exceed_debits):
                raise AccountMismatch(f"account {spec.code} ({asset_code}) exists with other "
                                      "type/flags")
            self._accounts[(spec.code, asset_code)] = Account(
                id=row.id, code=row.code, asset=asset, type=AccountType(row.type),
                debits_must_not_exceed_credits=row.debits_must_not_exceed_credits,
                credits_must_not_exceed_debits=row.credits_must_not_exceed_debits)
        return True

    def forget(self, specs: Sequence[tuple[chart.AccountSpec, str]]) -> None:
        """Drop entries whose opening transaction did not commit."""
        with self._lock:
            for spec, asset_code in specs:
                self._accounts.pop((spec.code, asset_code), None)


def accounts_needed(chain: ChainConfig,
                    deposits: Sequence[DepositRecord]) -> list[tuple[chart.AccountSpec, str]]:
    """The accounts crediting ``deposits`` will post to."""
    needed: list[tuple[chart.AccountSpec, str]] = []
    for d in deposits:
        if d.booking == Booking.OWN and d.asset_code is not None:
            # Classified at settlement: suspense (custody), or capital (treasury / equity).
            needed += [(spec, d.asset_code) for spec in (
                chart.custody(chain.name), chart.suspense_unattributed(),
                chart.treasury(chain.name), chart.equity_owner())]
            continue
        if d.booking not in (Booking.USER, Booking.SUSPENSE) or d.asset_code is None:
            continue
        needed.append((chart.custody(chain.name), d.asset_code))
        if d.booking == Booking.USER and d.user_id is not None:
            needed.append((chart.user_wallet(d.user_id), d.asset_code))
        else:
            needed.append((chart.suspense_unattributed(), d.asset_code))
    return needed


def _entry(chain: ChainConfig, d: DepositRecord, accounts: AccountCache, rule: str,
           evidence: Mapping[str, Any], now: datetime) -> Entry:
    assert d.asset_code is not None and d.amount_minor is not None
    return credit_entry(chain, accounts, deposit_id=d.id, tx_hash=d.tx_hash,
                        position=d.position, booking=d.booking, user_id=d.user_id,
                        asset_code=d.asset_code, amount_minor=d.amount_minor,
                        booking_reason=d.booking_reason, rule=rule, evidence=evidence,
                        effective_at=now)


def credit_entry(chain: ChainConfig, accounts: AccountCache, *, deposit_id: int, tx_hash: str,
                 position: str, booking: str, user_id: str | None, asset_code: str,
                 amount_minor: int, booking_reason: str | None, rule: str,
                 evidence: Mapping[str, Any], effective_at: datetime) -> Entry:
    """The ledger entry that credits a final deposit: ``DR custody:{chain}`` / ``CR`` the
    user's wallet (or ``suspense:unattributed``), keyed by the deposit (one credit per
    deposit), with the rule and evidence it was credited under. Its accounts are in
    ``accounts`` (``AccountCache.ensure``)."""
    custody = accounts.get(chart.custody(chain.name).code, asset_code)
    to_user = booking == Booking.USER and user_id is not None
    spec = chart.user_wallet(user_id) if to_user and user_id else chart.suspense_unattributed()
    return Entry(
        idempotency_key=model.deposit_key(chain.name, tx_hash, position),
        kind="deposit" if to_user else "deposit_unattributed",
        effective_at=effective_at,
        source=f"watcher:{chain.name}",
        lines=(Line(custody, amount_minor), Line(accounts.get(spec.code, asset_code),
                                                 -amount_minor)),
        reference=f"{chain.name}:{tx_hash}:{position}",
        reason=booking_reason,
        metadata={"deposit_id": deposit_id, "rule": rule, "evidence": dict(evidence),
                  "user_id": user_id if to_user else None},
    )


def settle_final(uow: UnitOfWork, chain: ChainConfig, attestations: Mapping[int, Attestation],
                 finality: Mapping[int, Mapping[str, Any]], accounts: AccountCache,
                 keys: Sequence[Key], *, now: datetime) -> dict[str, int]:
    """Credit, book to suspense or hold the final deposits ``keys`` per their attestation.

    The ledger transactions (one per deposit, idempotency key from the deposit key, through
    ``ledger.service.post_batch``) and the history rows are written in this one transaction.
    Deposits that are no longer final (re-read under lock) or whose record is pending wait.
    A transfer to our own hot or cold address is classified by ``deposits.own.plan``
    (internal, capital, or suspense with a case), in this same transaction.
    """
    batch = HistoryBatch(now)
    entries: list[Entry] = []
    posted_deposits: list[_Credit] = []
    counts = {"credited": 0, "suspense": 0, "held": 0, "internal": 0, "capital": 0}
    taken: set[int] = set()
    plans: dict[int, own.OwnPlan] = {}
    for d in repo.lock_deposits(uow.conn, keys).values():
        verdict = attestations.get(d.id)
        if d.state != S.FINAL or verdict is None or (
                verdict.verdict is Verdict.PENDING and d.booking != Booking.REVIEW):
            continue
        event = model.event_at_finality(Booking(d.booking), verdict.verdict is Verdict.AGREED)
        final = dict(finality.get(d.id, {}))
        rule = str(final.pop("rule", ""))
        evidence = {**final, "attestation": verdict.evidence}
        if d.booking == Booking.OWN and event is E.ATTESTED_FOR_SUSPENSE:
            p = own.plan(uow, chain, d, accounts.get_spec, rule, evidence, now, taken)
            if p.entry is None:
                batch.add(d, S.FINAL, p.event, rule=rule, evidence=p.evidence)
                counts["internal"] += 1
                continue
            plans[d.id] = p
            entries.append(p.entry)
            posted_deposits.append((d, p.event, rule, p.evidence))
        elif event in (E.ATTESTED_FOR_USER, E.ATTESTED_FOR_SUSPENSE):
            entries.append(_entry(chain, d, accounts, rule, evidence, now))
            posted_deposits.append((d, event, rule, evidence))
        else:
            reason = verdict.reason if event is E.CUSTODY_RECORD_DISAGREED else d.booking_reason
            batch.add(d, S.FINAL, event, rule=rule or None, evidence=evidence, reason=reason)
            counts["held"] += 1
    posted = _post_credits(uow, batch, posted_deposits, accounts, chain, now, entries, plans)
    batch.write(uow)
    return {k: counts[k] + posted[k] for k in counts}


_COUNTED = {E.ATTESTED_FOR_USER: "credited", E.FUNDING_MATCHED: "capital"}


def append_event(uow: UnitOfWork, d: DepositRecord, event: DepositEvent, *, now: datetime,
                 **fields: Any) -> model.Transition:
    """Append one event to a (locked) deposit's history and move its state with it."""
    batch = HistoryBatch(now)
    moved = batch.add(d, DepositState(d.state), event, **fields)
    batch.write(uow)
    return moved


# --------------------------------------------------------------------------- provider inbox


def receive_notification(uow: UnitOfWork, provider: str, payload: Mapping[str, Any]) -> bool:
    """Store a custody provider notification before any processing; False if already stored.

    ``payload``: ``event_id``, ``chain``, ``tx_hash``, ``position``, ``status`` ("complete"
    when the provider calls the deposit done), ``address``, ``asset`` (ledger asset code) and
    ``amount_minor`` (a decimal string of ledger minor units). The same event id with other
    content is refused.
    """
    try:
        record = {
            "event_id": str(payload["event_id"]), "provider": provider,
            "chain": str(payload["chain"]), "tx_hash": str(payload["tx_hash"]).lower(),
            "position": str(payload["position"]), "status": str(payload["status"]),
            "to_address": str(payload["address"]).lower(), "asset_code": str(payload["asset"]),
            "amount_minor": parse_decimal_amount(str(payload["amount_minor"]), 0),
            "payload": dict(payload),
        }
    except (KeyError, AmountTextInvalid) as exc:
        raise NotificationInvalid(f"malformed notification: {exc}") from exc
    if repo.insert_inbox(uow.conn, record):
        return True
    event_id = str(record["event_id"])
    stored = repo.get_inbox(uow.conn, event_id)
    if stored is None or stored.payload != record["payload"]:
        raise NotificationInvalid(f"event id {event_id} was stored with other content")
    return False


# --------------------------------------------------------------------------- cases


def open_cases(uow: UnitOfWork) -> list[repo.CaseRecord]:
    """Cases without a resolution."""
    return [c for c in repo.get_cases(uow.conn) if c.resolved_by is None]


def resolve_case(uow: UnitOfWork, case_id: int, *, resolved_by: str, reason: str,
                 reverse: bool) -> int | None:
    """Resolve a case; with ``reverse`` the deposit's posting is reversed, referencing it.

    Returns the reversal's ledger transaction id (None when nothing was reversed).
    """
    repo.lock_case(uow.conn, case_id)
    found = repo.get_cases(uow.conn, case_id=case_id)
    if not found:
        raise DepositNotFound(f"no case {case_id}")
    case = found[0]
    if case.resolved_by is not None:
        raise CaseResolutionInvalid(f"case {case_id} is already resolved")
    reversal = None
    if reverse:
        if case.ledger_transaction_id is None:
            raise CaseResolutionInvalid(f"case {case_id} has no ledger transaction to reverse")
        reversal = ledger.reverse(
            uow, case.ledger_transaction_id, idempotency_key=f"deposit-case:{case_id}:reversal",
            reason=f"case {case_id}: {reason}", source=resolved_by,
        ).transaction_id
    repo.insert_case_resolution(uow.conn, case_id, reversal, resolved_by, reason)
    return reversal
