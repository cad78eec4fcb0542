"""Reconciliation: checks that compare the engine's records with each other (and with the chain
and the custody provider), and the one list of every case in the engine.

- A check gathers plain values (its ``repository`` module, in one read-only snapshot), diffs
  them with a pure function of ``reconcile.model`` (no database, no clock: ``now`` is passed)
  and returns a list of :class:`reconcile.model.Finding`. It never raises for a discrepancy.
- Every finding becomes a durable case (table ``cases``, migration 0021) through
  :func:`reconcile.service.record_findings`: an open case with the same type and subject (the
  stable key of the discrepancy) is re-sighted (last seen, count, observed, evidence), any other
  finding opens a case. A case is resolved once, by a person, naming the new ledger transaction
  that fixed it when the fix moved money; nothing is edited or deleted (trigger ``cases_guard``).
- The deposit watcher's and the withdrawal processor's cases (``deposit_cases``,
  ``withdrawal_cases``) are rows of ``cases`` too (by trigger): ``cases`` lists every case.
- Alerts are raised by the caller in ``api`` (``api.cases.record_and_alert``): this package
  imports nothing of ``api``.

Checks: ``reconcile.ledger`` (``ledger.integrity.verify``'s findings, the posting checks and
the seal chain included), ``reconcile.histories`` (deposit histories against the ledger),
``reconcile.aging`` (reserves past the SLA, unknown and held withdrawals, deposits held for
review, by age), ``reconcile.custody`` (per chain, holder and asset, the chain at the final
block against ``custody + treasury``, allowing only for the movements in flight the engine can
name; judged by ``reconcile.chain_model``) and ``reconcile.provider`` (a custody provider's
statement matched by reference, never by amount, and the clearing account's remainder; parsed
and matched by ``reconcile.provider_model``; formats in ``docs/provider-statements.md``).
"""
