"""Withdrawals: reserve, approve, sign, broadcast, track to finality, settle or release.

Design in brief (DESIGN.md section 6):

- ``model`` is the pure core: the states, the one ``transition`` table, request validation,
  exact unit conversions (ledger scale <-> on-chain decimals), fee caps and the decisions of the
  tracking ladder. No database, no web3, no clock reads.
- ``service/`` holds the use cases that need no chain call (request and reserve, approvals,
  cancel, write-off votes, returns, open items, the timeline), one module per concern. Every
  state change goes through ``model.transition`` and is written with its history row and its
  ledger entries in one unit of work.
- ``processor/`` is the chain side, one module per phase: one bounded ``step`` per chain signs
  reserved withdrawals (nonce and fee caps committed first, state ``signing``; the signer
  called outside any transaction; the attempt committed before it is sent), sends, tracks every
  attempt to finality, settles on a final receipt, books gas as the company's expense, bumps
  stuck transactions (same nonce, higher fees) and closes nonces that a payout no longer needs
  with a zero-value self-transfer (a "cancel" transaction).
- ``repository/`` holds all SQL, one module per concern (withdrawals and their history, the
  reserve's SQL functions, decisions, attempts and nonces, returns, reads of the ledger);
  ``signer`` puts signing behind an interface (a local development key, or a remote KMS, HSM
  or MPC service over HTTP with a timeout, whose answers are decoded and checked). (The
  fault-injecting JSON-RPC proxy of the tests is ``tests.support.fault_proxy``; the HTTP
  signing service of the tests is ``tests.support.signing_service``.)
- Nothing is released on a timer: an unknown outcome leaves ``unknown`` only on proof from the
  chain or a write-off decided by two different admins.
"""
