"""Integrity of the ledger: verify, rebuild the balance projection, take checkpoints.

``verify`` returns discrepancies as data (it never raises for a finding), in one REPEATABLE READ
snapshot. It starts from the newest verified checkpoint, or from the first posting with
``full=True``; some checks cover only the postings after that start, the others the whole
ledger every time:

- *incremental* (postings after the newest verified checkpoint; every posting with ``full``):
  stored balance = checkpoint + replay (balance and version), flags respected, trial balance
  zero per asset and custody = customer liabilities per asset (both on the replayed balances),
  every transaction with a posting after the start balanced per asset (all its postings
  summed), and every such posting on an existing account of the posting's asset, naming an
  existing ledger transaction (``posting_asset_mismatch``, ``posting_orphan``);
- *whole ledger, always*: transactions without postings, reversals and closings within their
  originals, the base checkpoint's digest;
- *seals* (``ledger.seals``): the seal chain recomputed after the seal the checkpoint recorded,
  or from the first seal with ``full=True``.

The database refuses wrong-asset and orphan postings from every writer at insert
(``ledger_postings_account_and_transaction``, migrations/sql/triggers/ledger_postings.sql), so
what the posting checks find was written before that check (revision 0019) or by a superuser
with triggers off. A row written that way *below* the newest checkpoint, by a superuser who
also kept the balances in step (so that the checkpoint verified), is only found by
``full=True`` (``custody verify --full``): run it after any such access, and from time to time.

``rebuild_balances`` recomputes the projection account by account under the same row locks the
post function takes, so it is safe while postings continue (no lost update).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy.engine import Engine

from config.uow import UnitOfWork, run_in_transaction
from ledger import chart
from ledger import repository as repo
from ledger.model import Account

Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class Discrepancy:
    """One finding of ``verify``: what drifted, where, expected and observed values."""

    kind: str
    subject: str
    expected: str
    observed: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.subject}: expected {self.expected}, observed {self.observed}"


@dataclass(frozen=True)
class VerifyReport:
    """Result of ``verify``."""

    discrepancies: list[Discrepancy]
    accounts: int
    checkpoint_id: int | None
    replayed_from_posting_id: int

    @property
    def ok(self) -> bool:
        """Whether nothing drifted."""
        return not self.discrepancies


def verify(engine: Engine, *, full: bool = False) -> VerifyReport:
    """Check every ledger invariant in one consistent snapshot; see the module docstring."""
    with repo.snapshot(engine, read_only=True) as conn:
        base = None if full else repo.newest_verified_checkpoint(conn)
        found: list[Discrepancy] = []
        if base is not None:
            digest = repo.checkpoint_digest(conn, base)
            if digest != base.digest:
                found.append(
                    Discrepancy(
                        "checkpoint_digest", f"checkpoint {base.id}", base.digest, digest
                    )
                )
        # Imported here: ledger.seals imports Discrepancy from this module.
        from ledger.seals import verify_seals

        found += verify_seals(conn, base).discrepancies
        states = repo.account_states(conn, base)
        found += _account_findings(states)
        lo = base.through_posting_id if base else repo.BEFORE_FIRST_POSTING
        for txid, asset, total in repo.unbalanced_transactions(conn, lo):
            found.append(
                Discrepancy(
                    "transaction_unbalanced", f"transaction {txid} {asset}", "0", str(total)
                )
            )
        for txid in repo.transactions_without_postings(conn):
            found.append(
                Discrepancy("transaction_empty", f"transaction {txid}", ">= 2 postings", "0")
            )
        found += _posting_findings(repo.posting_faults(conn, lo))
        for kind, pid, amount, used in repo.over_consumed_postings(conn):
            found.append(
                Discrepancy(
                    f"posting_over_{kind}",
                    f"posting {pid}",
                    f"|{kind}| <= {abs(amount)}, opposite sign",
                    str(used),
                )
            )
    return VerifyReport(found, len(states), base.id if base else None,
                        base.through_posting_id if base else 0)


def _posting_findings(faults: list[repo.PostingFault]) -> list[Discrepancy]:
    """Each posting off its account's asset, or naming a missing account or transaction."""
    found = []
    for f in faults:
        where = f"posting {f.posting_id} (transaction {f.transaction_id})"
        if not f.transaction_exists:
            found.append(Discrepancy("posting_orphan", where, f"transaction {f.transaction_id}",
                                     "no such transaction"))
        if f.account_code is None:
            found.append(Discrepancy("posting_orphan", where, f"account {f.account_id}",
                                     "no such account"))
        elif not f.asset_matches:
            found.append(Discrepancy("posting_asset_mismatch",
                                     f"{where} on {f.account_code} ({f.account_asset})",
                                     f"asset {f.account_asset}", f"asset {f.posting_asset}"))
    return found


def _account_findings(states: list[repo.AccountState]) -> list[Discrepancy]:
    found = []
    trial_stored: dict[str, int] = defaultdict(int)
    trial_replayed: dict[str, int] = defaultdict(int)
    custody: dict[str, int] = defaultdict(int)
    liabilities: dict[str, int] = defaultdict(int)
    for s in states:
        subject = f"{s.code} ({s.asset_code})"
        trial_replayed[s.asset_code] += s.replayed
        if s.stored is None:
            found.append(Discrepancy("balance_missing", subject, str(s.replayed), "no row"))
        else:
            trial_stored[s.asset_code] += s.stored
            if (s.stored, s.stored_version) != (s.replayed, s.replayed_version):
                found.append(
                    Discrepancy(
                        "balance_drift",
                        subject,
                        f"{s.replayed} (version {s.replayed_version})",
                        f"{s.stored} (version {s.stored_version})",
                    )
                )
        if (s.dnec and s.replayed > 0) or (s.cned and s.replayed < 0):
            found.append(Discrepancy("flag_violated", subject, "within its flag", str(s.replayed)))
        if chart.is_custody(s.code):
            custody[s.asset_code] += s.replayed
        elif chart.is_customer_liability(s.code):
            liabilities[s.asset_code] -= s.replayed
    for asset in sorted(trial_replayed):
        if trial_replayed[asset] != 0:
            found.append(
                Discrepancy("trial_balance", f"{asset} postings", "0", str(trial_replayed[asset]))
            )
        if trial_stored.get(asset, 0) != 0:
            found.append(
                Discrepancy(
                    "trial_balance", f"{asset} stored balances", "0", str(trial_stored[asset])
                )
            )
    for asset in sorted(set(custody) | set(liabilities)):
        if custody[asset] != liabilities[asset]:
            found.append(
                Discrepancy(
                    "custody_mismatch",
                    f"{asset} custody vs customer liabilities",
                    str(liabilities[asset]),
                    str(custody[asset]),
                )
            )
    return found


@dataclass(frozen=True)
class RebuildRefusal:
    """An account whose replayed balance breaks its flag (``flag_violated`` in ``verify``).

    The projection cannot hold that balance (its CHECK refuses it, as it refuses a posting
    that would), so the stored row is kept as it was: the postings are what is wrong, and a
    correcting transaction fixes them (DESIGN.md, "Stored balances"); rebuild again after it.
    """

    code: str
    asset_code: str
    flag: str
    #: Raw balances (debit positive), as the projection stores them.
    replayed: int
    stored: int | None

    def __str__(self) -> str:
        return (f"{self.code} ({self.asset_code}) replays to {self.replayed}, which breaks "
                f"{self.flag} (stored {self.stored} kept)")


@dataclass(frozen=True)
class RebuildReport:
    """Result of ``rebuild_balances``: every account of every batch is rebuilt but those whose
    replayed balance breaks their flag (``refused``)."""

    accounts: int
    corrected: int
    checkpoint_id: int | None
    refused: tuple[RebuildRefusal, ...] = ()


def broken_flag(account: Account, raw_minor: int) -> str | None:
    """The flag a raw (debit positive) balance of ``account`` breaks, if any (the CHECKs of
    ``account_balances``)."""
    if account.debits_must_not_exceed_credits and raw_minor > 0:
        return "debits_must_not_exceed_credits"
    if account.credits_must_not_exceed_debits and raw_minor < 0:
        return "credits_must_not_exceed_debits"
    return None


def rebuild_balances(
    engine: Engine, *, batch_size: int = 500, progress: Progress | None = None
) -> RebuildReport:
    """Recompute every stored balance from the newest verified checkpoint and the postings.

    Missing rows are recreated. Each batch of accounts is locked in id order (as posting does),
    replayed and corrected in one short transaction, so postings may continue meanwhile. An
    account whose replayed balance breaks its flag is left as stored and reported in
    ``refused``; the other accounts of its batch are rebuilt.
    """
    with UnitOfWork(engine) as uow:
        ids = repo.account_ids(uow.conn)
        base = repo.newest_verified_checkpoint(uow.conn)
    corrected = 0
    refused: list[RebuildRefusal] = []
    for start in range(0, len(ids), batch_size):
        chunk = ids[start : start + batch_size]

        def fix(uow: UnitOfWork, chunk: list[int] = chunk) -> tuple[int, list[RebuildRefusal]]:
            stored = repo.lock_balances_for_rebuild(uow.conn, chunk)
            replayed = repo.replay_accounts(uow.conn, base, chunk)
            wrong = {a: v for a, v in replayed.items() if stored.get(a) != v}
            accounts = repo.get_accounts_by_id(uow.conn, list(wrong)) if wrong else {}
            breaking = [
                RebuildRefusal(accounts[a].code, accounts[a].asset.code, flag, v[0],
                               stored[a][0] if a in stored else None)
                for a, v in wrong.items() if (flag := broken_flag(accounts[a], v[0]))]
            kept = {a: v for a, v in wrong.items() if broken_flag(accounts[a], v[0]) is None}
            if kept:
                repo.set_balances(uow.conn, kept)
            return len(kept), breaking

        fixed, breaking = run_in_transaction(engine, fix)
        corrected += fixed
        refused.extend(breaking)
        if progress:
            progress(min(start + batch_size, len(ids)), len(ids))
    return RebuildReport(len(ids), corrected, base.id if base else None, tuple(refused))


def create_checkpoint(engine: Engine) -> repo.CheckpointRecord:
    """Checkpoint every balance through the current posting watermark.

    The watermark is read under the exclusive write gate (no posting in flight below it); the
    checkpoint is then computed from the previous verified one in one REPEATABLE READ snapshot
    and marked verified only if the stored balances agree with it and the postings after it.
    """
    watermark = run_in_transaction(engine, lambda uow: repo.posting_watermark(uow.conn))
    with repo.snapshot(engine, read_only=False) as conn:
        base = repo.newest_verified_checkpoint(conn)
        if base is not None and base.through_posting_id >= watermark:
            return base
        return repo.insert_checkpoint(conn, base, watermark)
