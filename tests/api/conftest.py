"""The API tests reuse the ledger's test book."""

from tests.ledger.conftest import book  # noqa: F401  (a fixture, registered by import)
