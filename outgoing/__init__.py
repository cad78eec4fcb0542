"""One machine for every on-chain transaction we send (DESIGN.md sections 6 and 6a).

Withdrawals, sweeps, gas top-ups and hot-to-cold transfers all send from addresses we control.
They share this mechanism and nothing else; each movement kind keeps its own row, state machine
(one transition table, one function) and append-only history:

- nonces allocated per sending address in the database under a row lock
  (``repository.allocate_nonce``, table ``sender_nonces``);
- every attempt (hash, nonce, fee caps, raw transaction) recorded and committed before it is
  sent (``repository.insert_attempt``, table ``outgoing_attempts``, one foreign key per
  movement kind), and only recorded attempts are ever sent (``chain.send``);
- the signer called outside any database transaction, so no row lock is held while a remote
  signer thinks (``chain.sign``; ``signer``: the ``Signer`` interface, hot-wallet signers and
  deposit-address signers by derivation path);
- fee bumps that replace a stuck transaction at the same nonce, so that at most one attempt can
  be included (``model.bumped_fee_caps``);
- unknown outcomes resolved by re-querying every attempt and the sender's nonce at the final
  height (``chain.observe``, ``model.judge``), never assumed failed, never released on a timer;
- finality under the chain's rule (``chain.landed``).

Modules: ``model`` (pure), ``repository``, ``chain``, ``signer``, ``errors``.
"""
