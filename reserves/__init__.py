"""Proof of reserves and liabilities (DESIGN.md section 7, ``docs/proof-of-reserves.md``).

A report is taken at one ledger point and, per chain, at one final block: per asset the
customer liabilities, the ledger's custody and treasury, the on-chain holdings of all our
addresses, the difference and the reserve ratio; a Merkle-sum tree over the users' liabilities
whose root is published, with one inclusion proof per user; and a message naming the report
signed by every address that holds funds. Reports are stored append-only and form a history.

Modules:

- ``merkle``: the tree, the proofs and their verification (pure; ``docs/verify_proof.py`` is
  the same verification on Python's standard library alone);
- ``model``: the report's figures per asset, the leaves from the users' balances (pure);
- ``ownership``: the message each address signs, signing through the signers, and the offline
  check of a report's signatures;
- ``signers``: the signers the engine holds (hot wallets, deposit addresses by path);
- ``repository``: the SQL: the ledger point, the ledger's figures in its snapshot, stored
  reports, their addresses, signatures, leaves and upper nodes;
- ``service``: taking a report, reading reports, a user's proof, imported signatures;
- ``html``: the report as one self-contained HTML page with its history charted;
- ``errors``.
"""
