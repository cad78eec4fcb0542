"""Proof of reserves and liabilities (DESIGN.md section 7, ``docs/proof-of-reserves.md``).

A report is taken at one ledger point and, per chain, at one finalized block: per asset the
customer liabilities, the ledger's custody and treasury, the on-chain holdings of all our
addresses, the difference and the reserve ratio; a Merkle-sum tree over the users' liabilities
whose root is published, with one inclusion proof per user; and a message naming the report
signed by every address that holds funds.

Modules: ``merkle`` (the tree, proofs and their verification, pure), ``model`` (the report's
figures, pure).
"""
