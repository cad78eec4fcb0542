"""The chain layer: the only code that talks to an EVM node.

Deposits (and later withdrawals) use it to read blocks, receipts and logs, decide finality,
detect reorgs and derive deposit addresses. It knows nothing about the ledger or the database.

Modules:

- :mod:`chains.model` — pure rules and values, no I/O: finality rules
  (:class:`~chains.model.Confirmations`, :class:`~chains.model.FinalizedTag`,
  :func:`~chains.model.is_final`, :class:`~chains.model.FinalityEvidence`), the reorg fork-point
  search (:func:`~chains.model.find_common_ancestor`), block headers and observed transfers.
- :mod:`chains.rpc` — a raw JSON-RPC client with a timeout per call, bounded retries with
  backoff, batches that keep every item's outcome, and typed errors. It never returns "empty"
  for a call that failed: a watcher built on it cannot skip a block.
- :mod:`chains.evm` — decoding ERC-20 ``Transfer`` logs and native value transfers into
  :class:`~chains.model.ObservedTransfer` with a stable position (``"log:<n>"``, the index in
  the transaction receipt's logs; ``"call:0"`` for the top-level value), plus ABI helpers.
- :mod:`chains.traces` — internal native transfers from a ``callTracer`` call tree (pure):
  position ``"call:0.<i>.<j>..."``, the 0-based path below the top call; failed subtrees
  dropped, ``SELFDESTRUCT`` and ``CREATE`` with value counted, delegate and static calls not.
- :mod:`chains.probe` — the configuration checked against the node before a chain runs:
  ``eth_chainId`` and each token's ``decimals()`` compared (a pure
  :func:`~chains.probe.compare`), each token's ``symbol()`` recorded (string or bytes32).
- :mod:`chains.addresses` — deterministic deposit addresses (BIP-44 from a mnemonic for
  development, or from an account xpub with no private key).
- :mod:`chains.errors` — the chain errors, under :class:`config.errors.CustodyError`; each
  says whether a retry can help.

Conventions: quantities and amounts are ``int`` (never float); hashes and addresses are
0x-prefixed lower-case hex, except :mod:`chains.addresses`, which returns EIP-55 checksummed
addresses for display and configuration. Compare addresses lower-cased.

The local development chain (a managed anvil node, its dev accounts and the test contracts)
is not here: it lives in :mod:`devtools.anvil`, which no domain package imports.
"""
