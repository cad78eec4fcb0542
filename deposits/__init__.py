"""The deposit side: watchers that follow EVM chains and credit final deposits.

Design in brief (DESIGN.md section 5):

- Each user has one deposit address per chain family (``deposit_addresses``), derived
  deterministically (BIP-44 from a seed on development chains, an xpub in production). A
  transfer to an address we don't know is not ours and is not recorded.
- A deposit is keyed by (chain, tx hash, position): ``log:<n>`` is the index of the ERC-20
  ``Transfer`` in the transaction receipt's logs (never the block-wide ``logIndex``), ``call:0``
  the transaction's own native value, ``call:0.<i>.<j>...`` native value moved by an internal
  call (its 0-based path in the call tree, from the node's ``callTracer`` when the chain's
  ``trace_internal`` is on; ``chains.traces``). Several transfers in one transaction are
  several deposits.
- ``deposit_events`` is the append-only history (the database refuses UPDATE/DELETE/TRUNCATE);
  ``deposits`` holds each deposit's immutable facts and its current state, a projection moved
  in the same transaction as each history row. ``model.transition`` is the only thing that
  decides a new state.
- The amount is converted once, at ingestion, from on-chain decimals to the ledger asset's
  scale, exactly or not at all (then held for review). Values at or above 2^127 are ignored as
  out of range; unlisted and same-symbol fake tokens are ignored; below-minimum deposits are
  booked to ``suspense:unattributed`` once final.
- Finality is the chain's rule (``confirmations:N`` or ``finalized``), or a stricter one for
  large deposits of an asset (``finality_by_amount``, ``chains.model.FinalityPolicy``): the
  rule recorded with the deposit names the threshold that applied. A reorg before finality
  sends a deposit back to ``unconfirmed`` (never failed); it fails only when its sender's nonce
  was consumed by another transaction that is final under the chain's strictest rule.
- Crediting happens once final AND the custody record agrees (an attestor: the node re-reading
  the receipt, or the provider's stored notification), through ``ledger.service.post_batch``
  with an idempotency key derived from the deposit key, in the same transaction as the
  ``credited`` history row. A credited deposit whose block stops being canonical opens a
  durable case and raises an alert; nothing is reversed without an admin.
- Our own hot and cold addresses (``[chains.<name>] hot_addresses`` / ``cold_addresses``, the
  payout hot wallet included) are watched by the same watcher into the same history
  (``address_kind`` hot or cold, booking ``own``, no user); once final, ``own.plan`` books
  them as an internal movement (no posting), declared company capital (``DR treasury /
  CR equity:owner``) or, unattributed, to suspense with a case that two admins resolve
  (``deposits.own``). ``treasury`` reports the ledger next to the chain at the finalized block.
- ``watcher.Watcher.step`` is one bounded step; ``jobs.run_watch`` loops over it. What a
  scan's transaction writes for its new deposits is planned from plain values outside it
  (``scans``), so that a catch-up plans the next range while the database writes this one.
- Past the watcher's reorg window (``cursor_keep`` blocks), ``recheck.Rechecker.step`` (the job
  ``deposits.recheck:<chain>``) re-reads the blocks and receipts of settled deposits within a
  horizon, in bounded batches, and disputes one gone from the canonical chain with the same
  ``deep_reorg`` case and alert, once.
"""
